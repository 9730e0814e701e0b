import type { Region } from '../../lpwan/lorawan/regions.js';

/** Basics Station's name of each region, and the band a station may transmit in. */
const STATION_REGIONS: Record<Region['name'], { region: string; freqRange: [number, number] }> = {
  EU868: { region: 'EU863', freqRange: [863_000_000, 870_000_000] },
  US915: { region: 'US902', freqRange: [902_000_000, 928_000_000] },
  AU915: { region: 'AU915', freqRange: [915_000_000, 928_000_000] },
  AS923: { region: 'AS923-1', freqRange: [915_000_000, 928_000_000] },
};

type Sx1301Conf = Record<string, unknown>;

/** One SX1301 board: two radios, eight multi-SF channels given as (radio, IF offset), a standard channel. */
function board(radio0: number, radio1: number, multiSf: Array<[radio: number, offset: number]>, std: { radio: number; offset: number; bandwidth: number; sf: number } | undefined): Sx1301Conf {
  const conf: Sx1301Conf = {
    radio_0: { enable: true, freq: radio0 },
    radio_1: { enable: true, freq: radio1 },
    chan_FSK: { enable: false },
    chan_Lora_std: std ? { enable: true, radio: std.radio, if: std.offset, bandwidth: std.bandwidth, spread_factor: std.sf } : { enable: false },
  };
  multiSf.forEach(([radio, offset], i) => {
    conf[`chan_multiSF_${i}`] = { enable: true, radio, if: offset };
  });
  return conf;
}

/** EU868: 867.1–867.9 MHz on radio 0, the mandatory 868.1, 868.3, 868.5 on radio 1, SF7BW250 on 868.3. */
function eu868(): Sx1301Conf {
  const channels: Array<[number, number]> = [
    [1, -400_000],
    [1, -200_000],
    [1, 0],
    [0, -400_000],
    [0, -200_000],
    [0, 0],
    [0, 200_000],
    [0, 400_000],
  ];
  return board(867_500_000, 868_500_000, channels, { radio: 1, offset: -200_000, bandwidth: 250_000, sf: 7 });
}

/** US915/AU915: the configured 8-channel sub-band (1–8) and its 500 kHz channel. */
function subBandPlan(first125: number, subBand: number): Sx1301Conf {
  const f0 = first125 + (subBand - 1) * 1_600_000;
  const channels: Array<[number, number]> = [0, 1, 2, 3].map((i): [number, number] => [0, -400_000 + 200_000 * i]);
  for (let i = 0; i < 4; i++) channels.push([1, -300_000 + 200_000 * i]);
  return board(f0 + 400_000, f0 + 1_100_000, channels, { radio: 0, offset: 300_000, bandwidth: 500_000, sf: 8 });
}

/** AS923: the two default channels 923.2 and 923.4 MHz. */
function as923(): Sx1301Conf {
  return board(923_300_000, 924_100_000, [
    [0, -100_000],
    [0, 100_000],
  ], undefined);
}

/** `[SF, BW kHz, downlink only]` per DR as Basics Station wants it: `[0,0,0]` for FSK, `[-1,0,0]` unused. */
function dataRateTable(region: Region): Array<[number, number, number]> {
  const table: Array<[number, number, number]> = [];
  for (let dr = 0; dr < 16; dr++) {
    const m = region.dataRates[dr];
    if (m) table.push([m.spreadingFactor, m.bandwidth, region.name !== 'EU868' && region.name !== 'AS923' && dr >= 8 ? 1 : 0]);
    else table.push(region.name === 'EU868' && dr === 7 ? [0, 0, 0] : [-1, 0, 0]);
  }
  return table;
}

/** The `router_config` answering a station's `version`, for the configured region. */
export function routerConfig(region: Region, subBand: number, muxTime: number): Record<string, unknown> {
  const named = STATION_REGIONS[region.name];
  const sx1301 = region.name === 'EU868' ? eu868() : region.name === 'US915' ? subBandPlan(902_300_000, subBand) : region.name === 'AU915' ? subBandPlan(915_200_000, subBand) : as923();
  return {
    msgtype: 'router_config',
    NetID: null,
    JoinEui: null,
    region: named.region,
    hwspec: 'sx1301/1',
    freq_range: named.freqRange,
    DRs: dataRateTable(region),
    sx1301_conf: [sx1301],
    // Duty cycle, listen-before-talk and dwell time are the network server's business (it checks them per window).
    nocca: true,
    nodc: true,
    nodwell: true,
    MuxTime: muxTime,
  };
}
