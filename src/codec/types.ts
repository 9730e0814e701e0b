// The codec layer contract (docs/codecs.md). Every codec returns these shapes.
import type { JsonValue } from '../core/json.js';

/** One asset state produced by a codec; `at` is an ISO 8601 UTC string with milliseconds. */
export interface DecodedState {
  value: JsonValue;
  at?: string;
}

export interface DecodeResult {
  states: { [asset: string]: DecodedState };
  /** Problems that dropped or changed part of the result. */
  warnings: string[];
  /** Non-empty => the message could not be decoded at all; `states` is then `{}`. */
  errors: string[];
}

export interface EncodeResult {
  /** Empty when `errors` is non-empty. */
  bytes: Uint8Array;
  /** Only JS codecs can set it. */
  fPort?: number;
  /** Only JS codecs can set it. */
  confirmed?: boolean;
  warnings: string[];
  /** Non-empty => the command is refused and nothing is sent. */
  errors: string[];
}
