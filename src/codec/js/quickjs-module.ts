import type { QuickJSWASMModule } from 'quickjs-emscripten';

const MIB = 1024 * 1024;
const WASM_PAGE = 64 * 1024;

export interface QuickJSModuleOptions {
  /**
   * Hard ceiling for the WebAssembly heap shared by every codec runtime of this module.
   * Why: QuickJS's per-runtime `setMemoryLimit` only refuses single allocations above the limit
   * in the emscripten build; many smaller strings or buffers accumulate unchecked (upstream
   * quickjs-emscripten issues #255 and #271; measured here: 3 GB of 1 MiB strings under a 16 MiB
   * limit). A fixed-size imported memory turns that into a clean "out of memory" at this cap.
   */
  maxHeapBytes?: number;
}

export const DEFAULT_MAX_HEAP_BYTES = 256 * MIB;

/** A new module with its own bounded heap (tests and tools; the daemon uses the shared one). */
export async function createQuickJSModule(options: QuickJSModuleOptions = {}): Promise<QuickJSWASMModule> {
  // Imported on first use: a gateway whose devices use no JS codec never pays its memory (~3 MB).
  const { newQuickJSWASMModuleFromVariant, newVariant, RELEASE_SYNC } = await import('quickjs-emscripten');
  const maximum = Math.ceil((options.maxHeapBytes ?? DEFAULT_MAX_HEAP_BYTES) / WASM_PAGE);
  const memory = new WebAssembly.Memory({ initial: Math.min(maximum, (16 * MIB) / WASM_PAGE), maximum });
  return newQuickJSWASMModuleFromVariant(newVariant(RELEASE_SYNC, { wasmMemory: memory }));
}

// The one piece of module-level state in the codec layer: the WebAssembly module is compiled
// and instantiated once per process (it is large and immutable; every runtime is created from
// it), so the promise is cached on first use. Runtimes themselves are never shared.
let sharedModule: Promise<QuickJSWASMModule> | undefined;

/** The process-wide QuickJS module (synchronous release build, bounded heap), loaded lazily. */
export function getQuickJSModule(): Promise<QuickJSWASMModule> {
  sharedModule ??= createQuickJSModule();
  return sharedModule;
}

export type { QuickJSWASMModule };
