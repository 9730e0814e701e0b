import type { DecodedState } from '../types.js';
import type { JsonObject, JsonValue } from '../../core/json.js';

/** Per-message state of one `sense` run; the compiled statements read and write it. */
export interface SenseRun {
  /** The binary uplink, or null in JSON mode. */
  readonly bytes: Uint8Array | null;
  /** The JSON uplink, or null in binary mode. */
  readonly json: JsonObject | null;
  readonly states: { [asset: string]: DecodedState };
  readonly warnings: string[];
}

/** Reads one value; undefined means "no value" and the reader has pushed a warning. */
export type ValueReader = (run: SenseRun) => JsonValue | undefined;

export type SenseStatement = (run: SenseRun) => void;
