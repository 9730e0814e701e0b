/** Machine codes of every refusal the service makes; HTTP statuses and MQTT error messages carry them. */
export const ErrorCodes = {
  INVALID_JSON: 400,
  INVALID_CBOR: 400,
  INVALID_BODY: 400,
  INVALID_MESSAGE: 400,
  INVALID_TIMESTAMP: 400,
  INVALID_NAME: 400,
  INVALID_PROFILE: 400,
  INVALID_QUERY: 400,
  ASSET_EXISTS: 400,
  DEVICE_EXISTS: 400,
  TOO_MANY_ASSETS: 400,
  GATEWAY_DEVICE_LIMIT: 400,
  LORAWAN_INVALID: 400,
  DEVEUI_EXISTS: 400,
  STATION_EXISTS: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  DEVICE_NOT_ASSIGNED: 403,
  NOT_FOUND: 404,
  DEVICE_NOT_FOUND: 404,
  ASSET_NOT_FOUND: 404,
  TOKEN_NOT_FOUND: 404,
  GATEWAY_NOT_FOUND: 404,
  NO_STATE: 404,
  NOT_LORAWAN: 404,
  METHOD_NOT_ALLOWED: 405,
  REDECODE_RUNNING: 409,
  REDECODE_UNAVAILABLE: 409,
  MANAGED_BY_CENTRAL: 409,
  CODEC_CHANGED: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  PROFILE_MISMATCH: 422,
  PROFILE_UNSUPPORTED: 422,
  STATES_REFUSED: 422,
  NOT_ACTUATOR: 422,
  DECODE_FAILED: 422,
  CODEC_INVALID: 422,
  DECODE_WARNING: 422,
  FPORT_INVALID: 422,
  ENCODE_FAILED: 422,
  RATE_LIMITED: 429,
  DOWNLINK_QUEUE_FULL: 429,
  INTERNAL: 500,
  STORAGE_UNAVAILABLE: 503,
  /** A central node lost its PostgreSQL (docs/scale-out.md): nothing written, retry. */
  STORE_UNAVAILABLE: 503,
  OUTBOX_FULL: 503,
} as const;

export type ErrorCode = keyof typeof ErrorCodes;

/** A refusal as a value: the doors turn it into an HTTP error body or an `errors` topic message. */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Seconds, for 429 and 503. */
  readonly retryAfter?: number;
  /** Extra members of the HTTP error body (e.g. the per-asset refusals of a device state). */
  readonly details?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: { retryAfter?: number; details?: Record<string, unknown> } = {}) {
    super(message);
    this.name = 'ServiceError';
    this.code = code;
    this.status = ErrorCodes[code];
    this.retryAfter = options.retryAfter;
    this.details = options.details;
  }
}

export function isServiceError(err: unknown): err is ServiceError {
  return err instanceof ServiceError;
}

/** A damaged database file: no retry helps, the operator restores a backup. */
export function isCorruption(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && /^SQLITE_(CORRUPT|NOTADB)/.test(code);
}

/** A write refused for lack of space (the store.maxBytes cap or a full disk). */
export function isStorageFull(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_FULL');
}

/**
 * The one mapping of SQLite failures to refusals: storage trouble is 503 STORAGE_UNAVAILABLE
 * (never a 500), whether it is temporary (busy, full) or a damaged file.
 */
export function storageError(err: unknown): ServiceError | undefined {
  const code = (err as { code?: unknown })?.code;
  if (isCorruption(err)) {
    return new ServiceError('STORAGE_UNAVAILABLE', `storage unavailable: the database file is damaged (${String(code)})`, { retryAfter: 60 });
  }
  if (typeof code === 'string' && /^SQLITE_(FULL|BUSY|LOCKED|IOERR|CANTOPEN|READONLY|NOMEM)/.test(code)) {
    return new ServiceError('STORAGE_UNAVAILABLE', `storage unavailable (${code})`, { retryAfter: 5 });
  }
  return undefined;
}
