// IEEE-754 binary16 (half precision): 1 sign bit, 5 exponent bits with bias 15, 10 fraction bits.

export function float16BitsToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 0x1f) return fraction === 0 ? sign * Infinity : NaN;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

/**
 * Rounds to nearest binary16 with ties to even; undefined when a finite value overflows
 * (65520 and up in magnitude).
 */
export function numberToFloat16Bits(value: number): number | undefined {
  if (Number.isNaN(value)) return 0x7e00;
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  const magnitude = Math.abs(value);
  if (magnitude === Infinity) return sign | 0x7c00;
  if (magnitude >= 65520) return undefined;
  if (magnitude < 2 ** -14) {
    // Subnormal: units of 2^-24; the division is exact, rounding happens in roundTiesToEven.
    const units = roundTiesToEven(magnitude * 2 ** 24);
    return sign | units; // units may reach 1024, which is exactly the smallest normal
  }
  let exponent = Math.floor(Math.log2(magnitude));
  // log2 can be off by one near powers of two.
  if (2 ** exponent > magnitude) exponent--;
  if (2 ** (exponent + 1) <= magnitude) exponent++;
  let fraction = roundTiesToEven((magnitude / 2 ** exponent - 1) * 1024);
  if (fraction === 1024) {
    fraction = 0;
    exponent++;
  }
  if (exponent > 15) return undefined;
  return sign | ((exponent + 15) << 10) | fraction;
}

function roundTiesToEven(x: number): number {
  const floor = Math.floor(x);
  const diff = x - floor;
  if (diff > 0.5) return floor + 1;
  if (diff < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}
