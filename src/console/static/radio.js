// Radio and delivery events in words, for a device's page and the live view. At a central each
// event carries `gateway`: the Outpost gateway that forwarded it (docs/sync.md, "Device events").
import { h } from './dom.js';

/** Frequencies travel in Hz; people read MHz. */
function megahertz(hz) {
  if (typeof hz !== 'number') return null;
  return `${(hz >= 1e6 ? hz / 1e6 : hz).toFixed(hz % 1e5 === 0 ? 1 : 3)} MHz`;
}

/** Radio frame sources are `gwmp:<EUI>` (a packet forwarder), `bs:<EUI>` (a Basics Station) or a serial modem's name. */
function sourceName(source) {
  const [kind, eui] = source.split(':', 2);
  if (eui && kind === 'gwmp') return `packet forwarder ${eui}`;
  if (eui && kind === 'bs') return `Basics Station ${eui}`;
  return source;
}

/** The link to a gateway's row on the Gateway page, by its name when known. */
export function gatewayLink(id, name) {
  return h('a', { href: `#/gateway/${encodeURIComponent(id)}`, title: `gateway ID ${id}`, dataset: { gateway: id } }, name ?? id);
}

/** "-87 dBm, SNR 7.5 dB, SF7BW125, 868.1 MHz, heard by gwmp": only what the event has. */
export function uplinkText(e) {
  const parts = [];
  if (typeof e.rssi === 'number') parts.push(`${e.rssi} dBm`);
  if (typeof e.snr === 'number') parts.push(`SNR ${e.snr} dB`);
  if (typeof e.dataRate === 'string') parts.push(e.dataRate);
  const mhz = megahertz(e.frequency);
  if (mhz) parts.push(mhz);
  if (typeof e.source === 'string') parts.push(`heard by ${sourceName(e.source)}`);
  return parts.join(', ');
}

/** "sent in RX1" / "failed: no gateway in range" / "queued". */
export function downlinkText(e) {
  let text = String(e.status ?? 'unknown');
  if (e.window) text += ` in ${String(e.window).toUpperCase()}`;
  if (e.reason) text += `: ${e.reason}`;
  return text;
}

/** The nodes that say which gateway forwarded an event, or nothing when it came from this daemon's own radio. */
export function viaGateway(e, gatewayName) {
  return typeof e.gateway === 'string' ? [' via gateway ', gatewayLink(e.gateway, gatewayName(e.gateway))] : [];
}
