// Timestamp rules (docs/api.md, "Bodies"; docs/codecs.md), shared by ABCL `at`, CBOR data points and JS converters.

const MAX_DATE_MS = 8.64e15;

/** Unix milliseconds (fractions allowed) → ISO string, rounded down to whole milliseconds. */
export function epochMillisToIso(ms: number): string | undefined {
  if (!Number.isFinite(ms)) return undefined;
  const whole = Math.floor(ms);
  if (Math.abs(whole) > MAX_DATE_MS) return undefined;
  return new Date(whole).toISOString();
}

/** A number below 1e11 in magnitude counts Unix seconds, otherwise Unix milliseconds. */
export function epochNumberToIso(value: number): string | undefined {
  if (!Number.isFinite(value)) return undefined;
  return epochMillisToIso(Math.abs(value) < 1e11 ? value * 1000 : value);
}

const TIMESTAMP_PATTERN =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|z|[+-]\d{2}(?::?\d{2})?)?)?$/;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * `YYYY-MM-DD[(T|t| )HH:mm[:ss[(.|,)fraction]][zone]]`; a missing zone means UTC unless
 * `requireZone` (API input must carry one, docs/api.md).
 */
export function parseTimestampString(text: string, requireZone = false): string | undefined {
  const m = TIMESTAMP_PATTERN.exec(text);
  if (m === null) return undefined;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const hour = m[4] === undefined ? 0 : Number(m[4]);
  const minute = m[5] === undefined ? 0 : Number(m[5]);
  const second = m[6] === undefined ? 0 : Number(m[6]);
  const millis = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
  const zone = m[8];
  if (requireZone && zone === undefined) return undefined;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMinutes = 0;
  if (zone !== undefined && zone !== 'Z' && zone !== 'z') {
    const digits = zone.slice(1).replace(':', '');
    const zoneHours = Number(digits.slice(0, 2));
    const zoneMinutes = digits.length > 2 ? Number(digits.slice(2)) : 0;
    if (zoneHours > 23 || zoneMinutes > 59) return undefined;
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (zoneHours * 60 + zoneMinutes);
  }
  // setUTCFullYear keeps years below 100 literal; Date.UTC would map them into the 1900s.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, millis);
  return epochMillisToIso(date.getTime() - offsetMinutes * 60_000);
}

/** Any JSON value → ISO timestamp (docs/api.md, "Bodies"), or undefined when it is not a timestamp. */
export function toIsoTimestamp(value: unknown): string | undefined {
  if (typeof value === 'number') return epochNumberToIso(value);
  if (typeof value === 'string') return parseTimestampString(value);
  return undefined;
}
