/** Where a command writes its result lines (stdout in the program; a collector in tests). */
export type Output = (text: string) => void;

/** Prints `data` as indented JSON under `--json`, otherwise the human text `human()` builds. */
export type Show = (data: unknown, human: () => string) => void;

export const stdout: Output = (text) => process.stdout.write(text + '\n');

/** One rule for every command: `--json` prints the data a script reads, not the table a person reads. */
export function showFor(json: boolean, out: Output): Show {
  return (data, human) => out(json ? JSON.stringify(data, null, 2) : human());
}
