// Packet forwarder (Semtech UDP) datagrams for the fuzz targets: PUSH_DATA with structure-aware
// `rxpk` and `stat` JSON (known fields with values of every type, junk fields, deep nesting, large
// text), PULL_DATA and TX_ACK from made-up gateways, and raw or mutated bytes.
import { Rng, mutateBytes, mutateText, randomString, randomValue, toJsonText } from './generators.js';

/** A few gateways come back again and again; most EUIs are made up once. */
const KNOWN_EUIS = Array.from({ length: 16 }, (_, i) => `b827ebfffe00${i.toString(16).padStart(4, '0')}`);

function eui(rng: Rng): Buffer {
  if (rng.chance(0.5)) return Buffer.from(rng.pick(KNOWN_EUIS), 'hex');
  return Buffer.from(Array.from({ length: 8 }, () => rng.int(256)));
}

function header(rng: Rng, type: number, withEui = true): Buffer {
  const version = rng.chance(0.95) ? rng.pick([2, 2, 2, 1]) : rng.int(256);
  const head = Buffer.from([version, rng.int(256), rng.int(256), type]);
  return withEui ? Buffer.concat([head, eui(rng)]) : head;
}

/** A value for a field: usually of the right kind, sometimes anything at all. */
function field(rng: Rng, good: () => unknown): unknown {
  return rng.chance(0.75) ? good() : randomValue(rng);
}

function rxpk(rng: Rng, payloads: readonly Buffer[]): Record<string, unknown> {
  const payload = payloads.length > 0 && rng.chance(0.3) ? rng.pick(payloads) : Buffer.from(Array.from({ length: rng.int(rng.chance(0.05) ? 400 : 60) }, () => rng.int(256)));
  const packet: Record<string, unknown> = {
    time: field(rng, () => rng.pick(['2026-11-26T10:00:00.000000Z', 'x'.repeat(rng.int(200)), ''])),
    tmst: field(rng, () => rng.pick([rng.int(2 ** 32), -1, 2 ** 32, 1.5])),
    chan: field(rng, () => rng.int(8)),
    rfch: field(rng, () => rng.int(2)),
    freq: field(rng, () => rng.pick([868.1, 868.3, 869.525, 0, -1, 1e9, 902.3])),
    stat: field(rng, () => rng.pick([1, 1, 1, -1, 0])),
    modu: field(rng, () => rng.pick(['LORA', 'FSK', 'lora', ''])),
    datr: field(rng, () => rng.pick(['SF7BW125', 'SF12BW125', 'SF7BW500', 'SF99BW1', 50000, ''])),
    codr: field(rng, () => rng.pick(['4/5', '4/8', 'OFF', '9/9'])),
    rssi: field(rng, () => -rng.int(140)),
    lsnr: field(rng, () => rng.int(40) - 20),
    size: field(rng, () => payload.length),
    data: field(rng, () => payload.toString('base64').slice(0, rng.chance(0.9) ? undefined : rng.int(40))),
  };
  if (rng.chance(0.2)) packet.rsig = [{ ant: 0, chan: 1, rssic: -50, lsnr: 7 }];
  for (let i = rng.int(3); i > 0; i--) Object.defineProperty(packet, randomString(rng, rng.int(8)), { value: randomValue(rng), enumerable: true, writable: true, configurable: true });
  if (rng.chance(0.5)) for (const k of Object.keys(packet)) if (rng.chance(0.15)) delete packet[k];
  return packet;
}

function stat(rng: Rng): Record<string, unknown> {
  const s: Record<string, unknown> = {
    time: field(rng, () => '2026-11-26 10:00:00 GMT'),
    lati: field(rng, () => 46.24),
    long: field(rng, () => 3.25),
    alti: field(rng, () => 145),
    rxnb: field(rng, () => rng.int(100)),
    rxok: field(rng, () => rng.int(100)),
    rxfw: field(rng, () => rng.int(100)),
    ackr: field(rng, () => 100),
    dwnb: field(rng, () => rng.int(10)),
    txnb: field(rng, () => rng.int(10)),
    temp: field(rng, () => 41.5),
    pfrm: field(rng, () => 'Kerlink iBTS'),
    desc: field(rng, () => 'x'.repeat(rng.int(rng.chance(0.05) ? 50_000 : 100))),
  };
  for (let i = rng.int(4); i > 0; i--) Object.defineProperty(s, rng.pick(['__proto__', 'constructor', 'junk', randomString(rng, 6)]), { value: randomValue(rng), enumerable: true, writable: true, configurable: true });
  return s;
}

/** The JSON text of a PUSH_DATA: generated, then (often) mutated, sometimes nested absurdly deep. */
export function pushDataJson(rng: Rng, payloads: readonly Buffer[] = []): string {
  const body: Record<string, unknown> = {};
  if (rng.chance(0.8)) body.rxpk = rng.chance(0.95) ? Array.from({ length: rng.int(rng.chance(0.02) ? 300 : 6) }, () => rxpk(rng, payloads)) : randomValue(rng);
  if (rng.chance(0.5)) body.stat = rng.chance(0.95) ? stat(rng) : randomValue(rng);
  let text = toJsonText(body);
  if (rng.chance(0.02)) {
    const n = rng.pick([7, 100, 30_000]);
    text = `{"stat":{"rxnb":1,"junk":${'['.repeat(n)}${']'.repeat(n)}}}`;
  }
  return rng.chance(0.4) ? mutateText(rng, text) : text;
}

/** One datagram of any kind a sender on the network could make. */
export function gwmpDatagram(rng: Rng, payloads: readonly Buffer[] = []): Buffer {
  switch (rng.int(10)) {
    case 0:
    case 1:
    case 2:
    case 3:
      return Buffer.concat([header(rng, 0x00), Buffer.from(pushDataJson(rng, payloads))]);
    case 4:
    case 5:
      return header(rng, 0x02);
    case 6: {
      const ack = rng.chance(0.5) ? '' : rng.chance(0.7) ? toJsonText({ txpk_ack: { error: rng.pick(['NONE', 'TOO_LATE', 'COLLISION_BEACON', randomString(rng, rng.int(300))]) } }) : mutateText(rng, '{"txpk_ack":{"error":"TX_FREQ"}}');
      return Buffer.concat([header(rng, 0x05), Buffer.from(ack)]);
    }
    case 7:
      return Buffer.from(mutateBytes(rng, Buffer.concat([header(rng, rng.int(8)), Buffer.from(pushDataJson(rng, payloads))])));
    case 8:
      // Types the door only sends (PUSH_ACK, PULL_RESP, PULL_ACK), and unknown ones.
      return Buffer.concat([header(rng, rng.pick([0x01, 0x03, 0x04, 0x06, 0xff])), Buffer.from(Array.from({ length: rng.int(30) }, () => rng.int(256)))]);
    default:
      return Buffer.from(Array.from({ length: rng.int(rng.chance(0.1) ? 2000 : 20) }, () => rng.int(256)));
  }
}
