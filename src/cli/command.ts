import type { Output } from './output.js';

/** One top-level command of `outpost` (a file under src/cli/commands/). */
export interface CliCommand {
  /** Its lines of `outpost help`, each starting with two spaces. */
  usage: string;
  /**
   * Runs it with the arguments after the command word; resolves to the exit code. A mistake in
   * the command line throws `UsageError`; a refused request throws the `ServiceError` it got.
   */
  run(args: string[], argv: readonly string[], out: Output): number | Promise<number>;
}
