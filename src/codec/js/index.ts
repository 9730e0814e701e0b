export { JsCodec } from './codec.js';
export type { JsCodecOptions, JsCodecLoadResult, JsDecodeContext, JsEncodeContext, UplinkConvention, DownlinkConvention, CodecDirection } from './codec.js';
export { DEFAULT_JS_LIMITS, resolveJsLimits } from './limits.js';
export type { JsCodecLimits } from './limits.js';
export { getQuickJSModule, createQuickJSModule, DEFAULT_MAX_HEAP_BYTES, markModuleDamaged, onSharedModuleDamaged } from './quickjs-module.js';
export type { QuickJSWASMModule, QuickJSModuleOptions } from './quickjs-module.js';
