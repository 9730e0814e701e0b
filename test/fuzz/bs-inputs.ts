// LoRa Basics Station messages for the fuzz targets: every message type a station sends, with
// fields of the right kind or of any kind, 64-bit counters, junk members, mutated and deep text.
import { Rng, mutateText, randomString, randomValue, toJsonText } from './generators.js';

function field(rng: Rng, good: () => unknown): unknown {
  return rng.chance(0.75) ? good() : randomValue(rng);
}

const hexOf = (rng: Rng, bytes: number) => Array.from({ length: bytes }, () => rng.int(256).toString(16).padStart(2, '0')).join('');
const eui = (rng: Rng) => rng.pick([hexOf(rng, 8), 'b827:ebff:fe61:51b0', '::1', '00-04-a3-0b-00-1f-2a-3c', randomString(rng, 12), rng.int(2 ** 31)]);

function upinfo(rng: Rng): unknown {
  return field(rng, () => ({ rctx: field(rng, () => rng.int(4)), xtime: field(rng, () => rng.pick([rng.int(2 ** 31), 36028797019975467, -1, 1.5])), gpstime: 0, rssi: field(rng, () => -rng.int(140)), snr: field(rng, () => rng.int(30) - 15) }));
}

/** One message as text (counters sometimes written beyond 2^53, as a station does). */
export function stationMessageText(rng: Rng): string {
  const common = () => ({ DR: field(rng, () => rng.int(16)), Freq: field(rng, () => rng.pick([868_100_000, 867_500_000, 0, 1e12])), upinfo: upinfo(rng) });
  let message: Record<string, unknown>;
  switch (rng.int(8)) {
    case 0:
      message = { msgtype: 'version', station: field(rng, () => '2.0.6'), protocol: field(rng, () => 2), features: field(rng, () => 'rmtsh') };
      break;
    case 1:
    case 2:
      message = {
        msgtype: 'updf',
        MHdr: field(rng, () => rng.pick([0x40, 0x80, 0xe0])),
        DevAddr: field(rng, () => rng.int(2 ** 32) - 2 ** 31),
        FCtrl: field(rng, () => rng.int(256)),
        FCnt: field(rng, () => rng.int(65536)),
        FOpts: field(rng, () => hexOf(rng, rng.int(16))),
        FPort: field(rng, () => rng.int(257) - 1),
        FRMPayload: field(rng, () => hexOf(rng, rng.int(rng.chance(0.05) ? 300 : 40))),
        MIC: field(rng, () => rng.int(2 ** 32) - 2 ** 31),
        ...common(),
      };
      break;
    case 3:
      message = { msgtype: 'jreq', MHdr: field(rng, () => 0), JoinEui: field(rng, () => eui(rng)), DevEui: field(rng, () => eui(rng)), DevNonce: field(rng, () => rng.int(65536)), MIC: field(rng, () => rng.int(2 ** 31)), ...common() };
      break;
    case 4:
      message = { msgtype: 'propdf', FRMPayload: field(rng, () => hexOf(rng, rng.int(60))), ...common() };
      break;
    case 5:
      message = { msgtype: 'dntxed', diid: field(rng, () => rng.int(1000)), DevEui: field(rng, () => eui(rng)), rctx: 0, xtime: field(rng, () => rng.int(2 ** 40)) };
      break;
    case 6:
      message = { msgtype: 'timesync', txtime: field(rng, () => rng.int(2 ** 40)) };
      break;
    default:
      message = { msgtype: field(rng, () => rng.pick(['rmtsh', 'runcmd', 'getxtime', 'dnsched', 'event', randomString(rng, 6)])), x: randomValue(rng) };
  }
  for (let i = rng.int(3); i > 0; i--) Object.defineProperty(message, rng.pick(['__proto__', 'constructor', 'junk', randomString(rng, 5)]), { value: randomValue(rng), enumerable: true, writable: true, configurable: true });
  let text = toJsonText(message);
  // A counter beyond 2^53 written as a plain number, as the station writes xtime.
  if (rng.chance(0.1)) text = text.replace(/"xtime":\s*-?\d+(\.\d+)?/, '"xtime":36028797019975467123');
  return rng.chance(0.3) ? mutateText(rng, text) : text;
}
