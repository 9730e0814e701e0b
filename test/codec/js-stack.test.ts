// Node's own stack inside the QuickJS WebAssembly module: device bytes that make a codec recurse
// natively are refused, and a module that overflowed anyway is replaced, never reused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileCodec, getQuickJSModule, onSharedModuleDamaged } from '../../src/codec/index.js';
import { markModuleDamaged } from '../../src/codec/js/quickjs-module.js';

const JSON_CODEC = 'function decodeUplink(input) { var s = ""; for (var i = 0; i < input.bytes.length; i++) s += String.fromCharCode(input.bytes[i]); return { data: { v: JSON.parse(s) } }; }';

test('JSON.parse inside the sandbox refuses text nested deeper than 1 000 levels instead of overflowing the native stack', async () => {
  const { codec } = await compileCodec({ uplink: { format: 'js', script: JSON_CODEC } });
  try {
    const deep = new TextEncoder().encode('['.repeat(40_000) + ']'.repeat(40_000));
    const refused = codec!.decodeUplink(deep);
    assert.equal(refused.errors.length, 1);
    assert.match(refused.errors[0]!, /nested deeper than 1000 levels|timed out/);
    const fine = codec!.decodeUplink(new TextEncoder().encode('[[1, "]]]]"], {"a": [2]}]'));
    assert.deepEqual(fine.states.v!.value, [[1, ']]]]'], { a: [2] }]);
  } finally {
    codec!.dispose();
  }
});

test('a damaged shared module is never used again: its codecs refuse, new codecs load in a fresh module, listeners are told', async () => {
  const before = await getQuickJSModule();
  const { codec } = await compileCodec({ uplink: { format: 'js', script: JSON_CODEC } });
  let told = 0;
  const unsubscribe = onSharedModuleDamaged(() => told++);
  try {
    markModuleDamaged(before);
    assert.equal(told, 1);
    assert.match(codec!.decodeUplink(new TextEncoder().encode('1')).errors[0]!, /being reloaded/);
    const after = await getQuickJSModule();
    assert.notEqual(after, before);
    const fresh = await compileCodec({ uplink: { format: 'js', script: JSON_CODEC } });
    assert.deepEqual(fresh.codec!.decodeUplink(new TextEncoder().encode('[7]')).states.v!.value, [7]);
    fresh.codec!.dispose();
  } finally {
    unsubscribe();
    codec!.dispose(); // on a damaged module: abandoned, not walked
  }
});
