/**
 * An uplink is handled as a flat list of named steps on one context (docs/lpwan.md, "How an uplink
 * is handled"): each step reads and writes the context, and returns `STOP` to end the list quietly (the
 * frame was refused, counted and reported by the step itself). Steps are synchronous: the one
 * asynchronous piece (storing and answering) is started by the last step and tracked by the server.
 */
export const STOP = Symbol('stop');

export interface Step<C> {
  readonly name: string;
  run(ctx: C): void | typeof STOP;
}

/** Runs the steps in order; false when one stopped the list. */
export function runSteps<C>(ctx: C, steps: readonly Step<C>[]): boolean {
  for (const step of steps) if (step.run(ctx) === STOP) return false;
  return true;
}
