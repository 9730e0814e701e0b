export { loadAbcl, loadAbclUncached, decodeAbcl, encodeAbcl, AbclDocumentCache } from './document.js';
export type { CompiledAbcl, AbclLoadResult } from './document.js';
