// Input generators for the fuzz targets: a seeded PRNG, structure-aware JSON and CBOR generators,
// and byte/text mutators that break what the generators build. Deterministic for a given seed, so
// every finding can be replayed.

/** mulberry32: small, fast, good enough to drive mutations reproducibly. */
export class Rng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  next(): number {
    let t = (this.#state = (this.#state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(max: number): number {
    return Math.floor(this.next() * max);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

const SPECIAL_NUMBERS = ['0', '-0', '1e400', '-1e400', '1e-400', '9007199254740993', '-9007199254740993', '1.5', '3.4028235e38', '123456789012345678901234567890', '0.1', '-1', '2e308', '4.9e-324'];
const SPECIAL_STRINGS = [
  '',
  'a'.repeat(64) + '!',
  '\ud800',
  '\udc00x',
  '😀',
  '\u0000',
  '\u2028',
  '../../etc/passwd',
  '/dev/zero',
  '__proto__',
  'constructor',
  '0000-02-29T00:00:00Z',
  '0050-06-01T12:00:00.000+01:00',
  '2026-11-21T10:00:00Z',
  '2026-13-45T99:99:99Z',
  '+275760-09-13T00:00:00Z',
  '-000001-01-01T00:00:00Z',
  '9999-12-31T23:59:60.999999999-23:59',
  '%ED%A0%80',
  'value',
  'Value',
];
const KEYS = ['value', 'Value', 'VALUE', 'at', 'At', 'n', 'i', 's', 'obj', 'arr', 'b', 'pat', 'geo', 'lat', 'lng', '__proto__', 'constructor', 'toString', 'hasOwnProperty', '', 'x\ud800', '😀', 'a/b', '+', '#', '$sys'];

/** A random JSON-ish value; `numbers` may include text forms JSON.parse turns into Infinity. */
export function randomValue(rng: Rng, depth = 0): unknown {
  const roll = rng.int(depth > 6 ? 5 : 8);
  switch (roll) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return rng.chance(0.3) ? Number(rng.pick(SPECIAL_NUMBERS)) : (rng.next() - 0.5) * 10 ** rng.int(12);
    case 3:
      return rng.chance(0.5) ? rng.int(1000) - 100 : rng.pick([-Infinity, Infinity, NaN, Number.MAX_VALUE, Number.MIN_VALUE, 2 ** 53 + 2]);
    case 4:
      return rng.chance(0.4) ? rng.pick(SPECIAL_STRINGS) : randomString(rng, rng.int(20));
    case 5:
    case 6: {
      const out: Record<string, unknown> = {};
      for (let i = rng.int(5); i > 0; i--) Object.defineProperty(out, rng.pick(KEYS), { value: randomValue(rng, depth + 1), enumerable: true, writable: true, configurable: true });
      return out;
    }
    default:
      return Array.from({ length: rng.int(5) }, () => randomValue(rng, depth + 1));
  }
}

export function randomString(rng: Rng, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) {
    const r = rng.int(10);
    if (r < 6) out += String.fromCharCode(0x20 + rng.int(95));
    else if (r < 8) out += String.fromCharCode(rng.int(0x10000));
    else if (r < 9) out += rng.pick(['\\', '"', '\n', '\t', '\0', '\ud83d\ude00']);
    else out += String.fromCodePoint(0x10000 + rng.int(0x100000));
  }
  return out;
}

/** JSON text of a value, with non-finite numbers written as numbers JSON.parse overflows. */
export function toJsonText(value: unknown): string {
  return JSON.stringify(value, (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? `__NUM_${Number.isNaN(v) ? '1e400' : v > 0 ? '1e400' : '-1e400'}__` : v)).replace(
    /"__NUM_(-?1e400)__"/g,
    '$1',
  );
}

const JSON_TOKENS = ['{', '}', '[', ']', '"', ':', ',', '\\', '\\u', '\\ud800', '\\udfff', '1e400', '-', '.', 'e', '0', 'null', 'true', 'fals', ' ', '\n', '{"value":', '"at":', '"__proto__":', '\u0000', '\ud800', '😀'];

/** Text mutations: the edits a broken or hostile device makes. */
export function mutateText(rng: Rng, text: string): string {
  let out = text;
  for (let edits = 1 + rng.int(4); edits > 0; edits--) {
    const at = rng.int(out.length + 1);
    switch (rng.int(7)) {
      case 0:
        out = out.slice(0, at) + rng.pick(JSON_TOKENS) + out.slice(at);
        break;
      case 1:
        out = out.slice(0, at) + out.slice(at + 1 + rng.int(8));
        break;
      case 2:
        out = out.slice(0, at);
        break;
      case 3: {
        const len = rng.int(16);
        out = out.slice(0, at) + out.slice(at, at + len).repeat(1 + rng.int(4)) + out.slice(at);
        break;
      }
      case 4:
        out = out.slice(0, at) + String.fromCharCode(rng.int(0x10000)) + out.slice(at + 1);
        break;
      case 5: {
        const n = rng.pick([10, 31, 32, 33, 64, 1000, 40_000]);
        out = out.slice(0, at) + '['.repeat(n) + ']'.repeat(rng.chance(0.8) ? n : rng.int(n)) + out.slice(at);
        break;
      }
      default:
        out = out.slice(0, at) + rng.pick(SPECIAL_NUMBERS) + out.slice(at);
    }
  }
  return out;
}

/** Byte mutations for binary formats. */
export function mutateBytes(rng: Rng, bytes: Uint8Array): Uint8Array {
  let out = Array.from(bytes);
  for (let edits = 1 + rng.int(4); edits > 0; edits--) {
    const at = rng.int(out.length + 1);
    switch (rng.int(6)) {
      case 0:
        if (out.length > 0) out[Math.min(at, out.length - 1)] ^= 1 << rng.int(8);
        break;
      case 1:
        out.splice(at, 0, rng.int(256));
        break;
      case 2:
        out.splice(at, 1 + rng.int(4));
        break;
      case 3:
        out = out.slice(0, at);
        break;
      case 4:
        out.splice(at, 0, ...rng.pick([[0x9f], [0xbf], [0xff], [0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], [0xfb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0], [0xf9, 0x7e, 0x00], [0xc0], [0xc1], [0xd8, 0x78], [0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]]));
        break;
      default: {
        const len = 1 + rng.int(8);
        out.splice(at, 0, ...out.slice(at, at + len));
      }
    }
  }
  return Uint8Array.from(out);
}

function head(major: number, argument: number): number[] {
  const type = major << 5;
  if (argument < 24) return [type | argument];
  if (argument < 0x100) return [type | 24, argument];
  if (argument < 0x10000) return [type | 25, argument >> 8, argument & 0xff];
  return [type | 26, (argument >>> 24) & 0xff, (argument >> 16) & 0xff, (argument >> 8) & 0xff, argument & 0xff];
}

/** A random CBOR item written head by head: every major type, tags, floats, indefinite lengths. */
export function randomCbor(rng: Rng, depth = 0): number[] {
  const utf8 = (s: string) => Array.from(Buffer.from(s, 'utf8'));
  switch (rng.int(depth > 5 ? 6 : 10)) {
    case 0:
      return head(0, rng.chance(0.5) ? rng.int(30) : rng.int(2 ** 31));
    case 1:
      return rng.chance(0.8) ? head(1, rng.int(1000)) : [0x3b, ...Array.from({ length: 8 }, () => rng.int(256))];
    case 2: {
      const bytes = Array.from({ length: rng.int(10) }, () => rng.int(256));
      return [...head(2, bytes.length), ...bytes];
    }
    case 3: {
      const text = utf8(rng.chance(0.3) ? rng.pick(SPECIAL_STRINGS) : randomString(rng, rng.int(12)));
      return [...head(3, text.length), ...text];
    }
    case 4:
      return rng.pick([[0xf4], [0xf5], [0xf6], [0xf7], [0xf9, 0x7c, 0x00], [0xf9, 0x7e, 0x00], [0xfa, 0x7f, 0x80, 0, 0], [0xfb, 0xff, 0xf0, 0, 0, 0, 0, 0, 0], [0xfb, 0x40, 0x35, 0x80, 0, 0, 0, 0, 0], [0xf8, 0x20]]);
    case 5: {
      const tag = rng.pick([0, 1, 2, 3, 103, 120, 1001, 55799, rng.int(70000)]);
      return [...head(6, tag), ...randomCbor(rng, depth + 1)];
    }
    case 6:
    case 7: {
      const n = rng.int(4);
      const indefinite = rng.chance(0.2);
      const items: number[] = [];
      for (let i = 0; i < n; i++) {
        const key = rng.pick(KEYS);
        const k = utf8(key);
        items.push(...(rng.chance(0.85) ? [...head(3, k.length), ...k] : randomCbor(rng, depth + 1)), ...randomCbor(rng, depth + 1));
      }
      return indefinite ? [0xbf, ...items, 0xff] : [...head(5, n), ...items];
    }
    case 8: {
      const n = rng.int(4);
      const items = Array.from({ length: n }, () => randomCbor(rng, depth + 1)).flat();
      return rng.chance(0.2) ? [0x9f, ...items, 0xff] : [...head(4, n), ...items];
    }
    default: {
      // Deep nesting: past the CBOR limit of 32 levels, or just under it.
      const levels = rng.pick([31, 32, 33, 200, 5000]);
      return [...Array(levels).fill(0x81), 0x01];
    }
  }
}

/** A device state as CBOR: a map of asset names (often real ones), sometimes wrapped in tag 120. */
export function randomCborDeviceState(rng: Rng, assetNames: readonly string[]): Uint8Array {
  const n = rng.int(4);
  const body: number[] = [...head(5, n)];
  for (let i = 0; i < n; i++) {
    const name = Buffer.from(rng.chance(0.8) ? rng.pick(assetNames) : rng.pick(KEYS), 'utf8');
    body.push(...head(3, name.length), ...name, ...randomCbor(rng, 1));
  }
  let bytes = body;
  if (rng.chance(0.3)) bytes = [0xd8, 0x78, 0x82, ...body, ...(rng.chance(0.5) ? [0xc1, ...head(0, rng.int(2 ** 31))] : randomCbor(rng, 1))];
  return Uint8Array.from(bytes);
}
