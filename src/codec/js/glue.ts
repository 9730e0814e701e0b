// Code evaluated inside the sandbox. Values cross the boundary only as JSON text.

/**
 * Runs before the user script: a no-op console, and a per-call budget on typed-array and
 * ArrayBuffer allocations. QuickJS's runtime memory limit does not count ArrayBuffer storage
 * (measured: 100 × 1 MiB under a 16 MiB limit succeeded), so the budget is charged here by
 * wrapping the constructors; species lookups (slice, map, from …) go through the wrappers too
 * because each prototype's `constructor` is pointed at its wrapper.
 *
 * JSON.parse is wrapped too: QuickJS's parser recurses once per nesting level on Node's own stack
 * (WebAssembly frames), so device bytes like `[[[…20 000…]]]` handed to JSON.parse by a codec
 * would overflow it and damage the module (quickjs-module.ts). Text deeper than 1 000 levels is a
 * SyntaxError instead; text shorter than that cannot be that deep and is not scanned.
 */
export function preludeSource(bufferBudgetBytes: number): string {
  return `(function () {
  var noop = function () {};
  globalThis.console = { log: noop, info: noop, warn: noop, error: noop, debug: noop, trace: noop };
  var budget = ${bufferBudgetBytes}, charged = 0;
  function charge(bytes) {
    charged += bytes;
    if (charged > budget) { charged = budget + 1; throw new InternalError('out of memory'); }
  }
  var names = ['ArrayBuffer', 'SharedArrayBuffer', 'Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array',
    'Int32Array', 'Uint32Array', 'Float16Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array'];
  names.forEach(function (name) {
    var original = globalThis[name];
    if (typeof original !== 'function') return;
    var isBuffer = name === 'ArrayBuffer' || name === 'SharedArrayBuffer';
    var wrapper = new Proxy(original, {
      construct: function (target, args, newTarget) {
        var result = Reflect.construct(target, args, newTarget === wrapper ? target : newTarget);
        if (isBuffer) charge(typeof result.maxByteLength === 'number' ? result.maxByteLength : result.byteLength);
        else if (!(args[0] instanceof ArrayBuffer) && !(typeof SharedArrayBuffer === 'function' && args[0] instanceof SharedArrayBuffer)) charge(result.byteLength);
        return result;
      }
    });
    Object.defineProperty(original.prototype, 'constructor', { value: wrapper, writable: true, configurable: true });
    globalThis[name] = wrapper;
  });
  ['transfer', 'transferToFixedLength'].forEach(function (method) {
    var original = ArrayBuffer.prototype[method];
    if (typeof original !== 'function') return;
    Object.defineProperty(ArrayBuffer.prototype, method, { value: function (length) {
      var result = original.apply(this, arguments); charge(result.byteLength); return result;
    }, writable: true, configurable: true });
  });
  var originalParse = JSON.parse;
  Object.defineProperty(JSON, 'parse', { value: function parse(text, reviver) {
    var s = String(text);
    if (s.length > 1000) {
      for (var i = 0, depth = 0, inString = false; i < s.length; i++) {
        var c = s.charCodeAt(i);
        if (inString) { if (c === 92) i++; else if (c === 34) inString = false; }
        else if (c === 34) inString = true;
        else if (c === 91 || c === 123) { if (++depth > 1000) throw new SyntaxError('JSON nested deeper than 1000 levels'); }
        else if (c === 93 || c === 125) depth--;
      }
    }
    return originalParse(s, reviver);
  }, writable: true, configurable: true });
  return function resetBudget() { var used = charged; charged = 0; return used; };
})()`;
}

/** Entry-point detection, evaluated after the user script. */
export const DETECT_SOURCE = `JSON.stringify({
  decodeUplink: typeof decodeUplink === 'function', Decoder: typeof Decoder === 'function',
  encodeDownlink: typeof encodeDownlink === 'function', Encoder: typeof Encoder === 'function',
  converter: typeof converter === 'function' })`;

/**
 * The call function: (kind, inputJson) → resultJson. It references the entry points through
 * the global object at call time, parses the input, builds recvTime as a sandbox Date, and
 * stringifies the result with typed arrays turned into plain arrays.
 */
export const CALL_SOURCE = `(function (resetBufferBudget) {
  var parse = JSON.parse, stringify = JSON.stringify, g = globalThis;
  function plain(key, value) {
    return ArrayBuffer.isView(value) && !(value instanceof DataView) ? Array.prototype.slice.call(value) : value;
  }
  function describe(e) {
    // QuickJS throws null when it cannot even allocate the out-of-memory error object.
    if (e === null) return { name: 'InternalError', message: 'out of memory' };
    if (typeof e === 'object') return { name: String(e.name), message: String(e.message) };
    return { name: 'Error', message: String(e) };
  }
  return function (kind, text) {
    resetBufferBudget();
    var input = parse(text), result;
    try {
      if (kind === 'decodeUplink') { input.recvTime = new Date(input.recvTime); result = g.decodeUplink(input); }
      else if (kind === 'Decoder') result = g.Decoder(input.bytes, input.fPort);
      else if (kind === 'converter') result = g.converter(input.code);
      else if (kind === 'encodeDownlink') result = g.encodeDownlink(input);
      else if (kind === 'Encoder') result = g.Encoder(input.data, input.fPort);
    } catch (e) {
      var thrown = describe(e);
      return stringify({ threw: true, name: thrown.name, message: thrown.message });
    }
    try {
      return stringify({ result: result === undefined ? null : result }, plain);
    } catch (e) {
      return stringify({ invalid: true, message: describe(e).message });
    }
  };
})`;
