// A disposable QuickJS module that compiles untrusted scripts before the shared one sees them.
//
// Why: QuickJS's parser recurses in C once per nesting level (parentheses, brackets, unary
// operators …) without a stack check of its own, and inside WebAssembly those frames live on
// Node's native stack. A script nested about 1 000 levels deep exhausts it: a RangeError unwinds
// through the WebAssembly frames, and the module's own stack pointer is never restored. Measured
// here: after such overflows every codec of the same module failed ("codec threw: Error: "). So a
// script is first compiled (not run) in a separate module, with part of Node's stack already
// used up as a margin; if that overflows, the script is refused and the probe module discarded.
import type { QuickJSWASMModule } from 'quickjs-emscripten';
import { createQuickJSModule } from './quickjs-module.js';

const MIB = 1024 * 1024;

/**
 * Frames of plain JS recursion taken before the probe compiles, so a script that passes the probe
 * has stack to spare when the shared module loads it from a deeper call (≈100 KB or more of
 * Node's ≈1 MB; a legitimate codec never nests anywhere near that deep).
 */
const MARGIN_FRAMES = 1500;

function withStackMargin(frames: number, run: () => void): number {
  if (frames === 0) {
    run();
    return 0;
  }
  // The addition keeps the call out of tail position, so every level holds a real frame.
  return withStackMargin(frames - 1, run) + 1;
}

export class ScriptParseProbe {
  #module: Promise<QuickJSWASMModule> | undefined;

  /** Why the script cannot be loaded safely, or undefined when its parse fits the stack. */
  async check(source: string): Promise<string | undefined> {
    const module = await (this.#module ??= createQuickJSModule({ maxHeapBytes: 64 * MIB }));
    try {
      withStackMargin(MARGIN_FRAMES, () => compileOnly(module, source));
      return undefined;
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      // The module's stack is now unusable: never touch it again.
      this.#module = undefined;
      return 'script is nested too deeply to parse safely (the parser ran out of stack); flatten its expressions';
    }
  }
}

function compileOnly(module: QuickJSWASMModule, source: string): void {
  const runtime = module.newRuntime();
  const context = runtime.newContext();
  // On a RangeError this throws past the disposal on purpose: the module is abandoned whole.
  const result = context.evalCode(source, 'codec.js', { type: 'global', compileOnly: true });
  if (result.error !== undefined) result.error.dispose();
  else result.value.dispose();
  context.dispose();
  runtime.dispose();
}

let sharedProbe: ScriptParseProbe | undefined;

/** The process-wide probe (created on first use, like the shared QuickJS module it protects). */
export function sharedParseProbe(): ScriptParseProbe {
  sharedProbe ??= new ScriptParseProbe();
  return sharedProbe;
}
