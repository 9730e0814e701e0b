// Timestamps: the one ISO 8601 reader, for API input (docs/api.md, "Bodies") and for the times
// codecs read from payloads (docs/codecs.md), plus the epoch-number rules and the output form.

/**
 * What a timestamp text may leave out or bend. The two sets below are the ones in use; each
 * keeps exactly what its callers have always accepted.
 */
export interface TimestampForm {
  /** Refuse text without a zone (API input), or read it as UTC, a date alone as its midnight (codec data). */
  zone: 'required' | 'utc-when-missing';
  /**
   * API input has always taken second 60 (a leap second, read as :59) and a zone `±hh:` without
   * minutes; codecs refuse both, so that their warnings name such a time.
   */
  apiLeniency: boolean;
}

/** `at`, `from`, `to` in request bodies and MQTT payloads: ISO 8601 with a zone, any fraction length. */
export const API_TIMESTAMP: TimestampForm = { zone: 'required', apiLeniency: true };
/** Times a codec finds in a payload (CBOR tag 0, ABCL `at`, JS results): a missing zone is UTC. */
export const CODEC_TIMESTAMP: TimestampForm = { zone: 'utc-when-missing', apiLeniency: false };
/** `at` of the JSON device-state codec: codec rules, but a zone is required as in the API. */
export const CODEC_TIMESTAMP_WITH_ZONE: TimestampForm = { zone: 'required', apiLeniency: false };

// `YYYY-MM-DD[(T|t| )HH:mm[:ss[(.|,)fraction]][Z|z|±hh[[:]mm]]]`
const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:([Zz])|([+-])(\d{2})(:?)(\d{2})?)?)?$/;

const MAX_DATE_MS = 8.64e15;

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

/** Zone offset in minutes east of UTC; undefined when out of range or not allowed by the form. */
function zoneOffsetMinutes(m: RegExpExecArray, form: TimestampForm): number | undefined {
  const [, , , , , , , , utc, sign, zoneHours, colon, zoneMinutes] = m;
  if (utc !== undefined) return 0;
  if (sign === undefined) return form.zone === 'required' ? undefined : 0;
  if (colon === ':' && zoneMinutes === undefined && !form.apiLeniency) return undefined;
  const hours = Number(zoneHours);
  const minutes = zoneMinutes === undefined ? 0 : Number(zoneMinutes);
  if (hours > 23 || minutes > 59) return undefined;
  return (sign === '-' ? -1 : 1) * (hours * 60 + minutes);
}

/** Epoch milliseconds of an ISO 8601 timestamp in `form`, or undefined when it is not one. */
export function parseTimestamp(text: string, form: TimestampForm = API_TIMESTAMP): number | undefined {
  const m = ISO_8601.exec(text);
  if (m === null) return undefined;
  const offset = zoneOffsetMinutes(m, form);
  if (offset === undefined) return undefined;
  const year = Number(m[1]), month = Number(m[2]), day = Number(m[3]);
  const hour = m[4] === undefined ? 0 : Number(m[4]);
  const minute = m[5] === undefined ? 0 : Number(m[5]);
  const second = m[6] === undefined ? 0 : Number(m[6]);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > (form.apiLeniency ? 60 : 59)) return undefined;
  // Sub-millisecond digits are truncated: the service stores and emits milliseconds.
  const millis = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
  const epoch = utcEpoch(year, month, day, hour, minute, Math.min(second, 59), millis) - offset * 60_000;
  return Number.isFinite(epoch) && Math.abs(epoch) <= MAX_DATE_MS ? epoch : undefined;
}

/** The service's one output form: UTC with milliseconds, `2026-11-21T10:00:00.000Z`. */
export function formatTimestamp(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

/** Unix milliseconds (fractions allowed) → ISO string, rounded down to whole milliseconds. */
export function epochMillisToIso(ms: number): string | undefined {
  if (!Number.isFinite(ms)) return undefined;
  const whole = Math.floor(ms);
  if (Math.abs(whole) > MAX_DATE_MS) return undefined;
  return formatTimestamp(whole);
}

/** A number below 1e11 in magnitude counts Unix seconds, otherwise Unix milliseconds. */
export function epochNumberToIso(value: number): string | undefined {
  if (!Number.isFinite(value)) return undefined;
  return epochMillisToIso(Math.abs(value) < 1e11 ? value * 1000 : value);
}

/** ISO 8601 text in `form` → the output form, or undefined when it is not a timestamp. */
export function isoTimestamp(text: string, form: TimestampForm): string | undefined {
  const epoch = parseTimestamp(text, form);
  return epoch === undefined ? undefined : formatTimestamp(epoch);
}

/** A timestamp a codec produced (a number, or text in the codec form) → ISO, or undefined when it is not one. */
export function toIsoTimestamp(value: unknown): string | undefined {
  if (typeof value === 'number') return epochNumberToIso(value);
  if (typeof value === 'string') return isoTimestamp(value, CODEC_TIMESTAMP);
  return undefined;
}

/** A clock passed in, so tests and the pipeline never read global time implicitly. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
