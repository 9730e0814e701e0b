// ISO 8601 with a mandatory zone; fraction of any length (none, 3, 6, 9 digits …) (docs/api.md, "Bodies").
const ISO_WITH_ZONE =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:([Zz])|([+-])(\d{2}):?(\d{2})?)$/;

/** Proleptic Gregorian calendar, year 0 included (ISO 8601). */
function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/**
 * Epoch milliseconds of a UTC date and time. Not `Date.UTC`: it reads years 0–99 as 1900–1999,
 * so `0050-…` would be stored fifty years late; setUTCFullYear takes every year literally.
 */
function utcEpoch(year: number, month: number, day: number, hour: number, minute: number, second: number, millis: number): number {
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, millis);
  return date.getTime();
}

/** Epoch milliseconds of an ISO 8601 timestamp with a zone, or undefined when it is not one. */
export function parseTimestamp(text: string): number | undefined {
  const m = ISO_WITH_ZONE.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s = '0', frac = '', z, sign, zh, zm = '0'] = m;
  const year = Number(y), month = Number(mo), day = Number(d), hour = Number(h), minute = Number(mi), second = Number(s);
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 60) return undefined;
  if (day < 1 || day > daysInMonth(year, month)) return undefined;
  // Sub-millisecond digits are truncated: the service stores and emits milliseconds.
  const millis = frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0;
  let epoch = utcEpoch(year, month, day, hour, minute, Math.min(second, 59), millis);
  if (!z) {
    const offsetHours = Number(zh), offsetMinutes = Number(zm);
    if (offsetHours > 23 || offsetMinutes > 59) return undefined;
    const offset = (offsetHours * 60 + offsetMinutes) * 60_000;
    epoch += sign === '+' ? -offset : offset;
  }
  return Number.isFinite(epoch) ? epoch : undefined;
}

/** The service's one output form: UTC with milliseconds, `2026-11-21T10:00:00.000Z`. */
export function formatTimestamp(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

/** A clock passed in, so tests and the pipeline never read global time implicitly. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
