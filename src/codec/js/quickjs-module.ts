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
let sharedModuleValue: QuickJSWASMModule | undefined;

/** The process-wide QuickJS module (synchronous release build, bounded heap), loaded lazily. */
export function getQuickJSModule(): Promise<QuickJSWASMModule> {
  if (!sharedModule) {
    const created = createQuickJSModule();
    sharedModule = created;
    void created.then((module) => {
      if (sharedModule === created) sharedModuleValue = module;
    });
  }
  return sharedModule;
}

// A module whose WebAssembly code overflowed Node's stack (a RangeError unwound through it) keeps
// a wrong internal stack pointer: measured here, its runtimes then fail or misbehave. Such a
// module is never used again; when it is the shared one, the next codec gets a fresh module and
// the owners of codecs (DeviceCodecs) are told so they can reload theirs.
const damagedModules = new WeakSet<QuickJSWASMModule>();
const sharedDamageListeners = new Set<() => void>();

export function markModuleDamaged(module: QuickJSWASMModule): void {
  if (damagedModules.has(module)) return;
  damagedModules.add(module);
  if (module === sharedModuleValue) {
    sharedModule = undefined;
    sharedModuleValue = undefined;
    for (const listener of sharedDamageListeners) listener();
  }
}

export function isModuleDamaged(module: QuickJSWASMModule): boolean {
  return damagedModules.has(module);
}

/** Called when the shared module was damaged; returns the unsubscribe function. */
export function onSharedModuleDamaged(listener: () => void): () => void {
  sharedDamageListeners.add(listener);
  return () => sharedDamageListeners.delete(listener);
}

export type { QuickJSWASMModule };
