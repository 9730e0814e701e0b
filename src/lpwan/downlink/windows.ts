import type { RadioCapabilities, WindowName } from '../radio.js';
import { dataRateIndex, JOIN_ACCEPT_DELAY1_MS, JOIN_ACCEPT_DELAY2_MS, RECEIVE_DELAY1_MS, RECEIVE_DELAY2_MS, type Region } from '../lorawan/regions.js';
import type { MacState } from '../mac/state.js';

/** A receive window of the device, before it is matched to a payload and a source. */
export interface PlannedWindow {
  name: WindowName;
  frequency: number;
  /** DR index in the region. */
  dataRate: number;
  /** After the uplink's reception; undefined = at once (Class C). */
  delayMs: number | undefined;
}

/**
 * The Class A windows after an uplink, in the order to try: RX1 (when the source can time it) then
 * RX2, with the device's RX parameters. A join accept uses the join delays (5 s / 6 s).
 */
export function classAWindows(region: Region, rx: MacState['rx'], uplink: { frequency: number; dataRate: string }, capabilities: RadioCapabilities, join: boolean): PlannedWindow[] {
  const windows: PlannedWindow[] = [];
  const upDr = dataRateIndex(region, uplink.dataRate);
  if (upDr !== undefined && capabilities.rx1) {
    const rx1 = region.rx1(uplink.frequency, upDr, rx.rx1DrOffset);
    if (rx1) windows.push({ name: 'rx1', frequency: rx1.frequency, dataRate: rx1.dataRate, delayMs: join ? JOIN_ACCEPT_DELAY1_MS : rx.rxDelay * RECEIVE_DELAY1_MS });
  }
  windows.push({ name: 'rx2', frequency: rx.rx2Frequency, dataRate: rx.rx2DataRate, delayMs: join ? JOIN_ACCEPT_DELAY2_MS : rx.rxDelay * RECEIVE_DELAY1_MS + (RECEIVE_DELAY2_MS - RECEIVE_DELAY1_MS) });
  return windows;
}

/** A Class C device listens on its RX2 parameters whenever it is not transmitting: one window, at once. */
export function classCWindow(rx: MacState['rx']): PlannedWindow {
  return { name: 'rx2c', frequency: rx.rx2Frequency, dataRate: rx.rx2DataRate, delayMs: undefined };
}
