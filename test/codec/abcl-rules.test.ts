// Per-rule unit tests of docs/codecs.md, "Writing an ABCL document".
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeAbcl, encodeAbcl, loadAbcl } from '../../src/codec/abcl/index.js';
import { parseExpression } from '../../src/codec/abcl/expression.js';
import { hex, mustLoad, toHex } from './helpers.js';

/** Decodes one selector as asset "v"; returns the value (undefined when skipped) and the warning count. */
function read(selector: Record<string, unknown>, input: string): { value: unknown; warnings: number } {
  const result = decodeAbcl(mustLoad({ sense: [{ asset: 'v', value: selector }] }), hex(input));
  assert.deepEqual(result.errors, []);
  return { value: result.states.v?.value, warnings: result.warnings.length };
}

function calc(expression: string, val: number): number {
  const parsed = parseExpression(expression);
  assert.ok(parsed.ok, `${expression} should parse`);
  return parsed.evaluate(val);
}

function loadProblems(doc: string | object): { errors: string[]; warnings: string[] } {
  const result = loadAbcl(doc);
  assert.equal(result.ok, result.errors.length === 0);
  return { errors: result.errors, warnings: result.warnings };
}

function encode(field: Record<string, unknown>, value: unknown, extra: object[] = []) {
  const doc = mustLoad({ actuate: [...extra, { asset: 'v', field }] });
  const result = encodeAbcl(doc, { v: value as never });
  return { hex: toHex(result.bytes), warnings: result.warnings.length, errors: result.errors.length };
}

describe('reading integers', () => {
  test('signedness at every width 1..8 bytes', () => {
    for (let n = 1; n <= 8; n++) {
      const allOnes = 'FF'.repeat(n);
      const signBit = '80' + '00'.repeat(n - 1);
      assert.equal(read({ byte: 0, bytelength: n, signed: true }, allOnes).value, -1, `n=${n} all ones`);
      assert.equal(read({ byte: 0, bytelength: n, signed: true }, signBit).value, -(2 ** (8 * n - 1)), `n=${n} sign bit`);
      assert.equal(read({ byte: 0, bytelength: n }, allOnes).value, n <= 6 ? 2 ** (8 * n) - 1 : Number(2n ** BigInt(8 * n) - 1n), `n=${n} unsigned`);
      assert.equal(read({ byte: 0, bytelength: n, signed: 'true', byteorder: 'little' }, '01' + '00'.repeat(n - 1)).value, 1);
    }
  });

  test('7- and 8-byte integers round once (BigInt), not twice', () => {
    // 2^53 + 1 is a tie between 2^53 and 2^53 + 2; ties go to even: 2^53.
    assert.equal(read({ byte: 0, bytelength: 7 }, '20000000000001').value, 2 ** 53);
    // 0x001FFFFFFFFFFFFF_FF... : accumulating in a Number would round at every step.
    assert.equal(read({ byte: 0, bytelength: 8 }, '0020000000000003').value, 9007199254740996);
    assert.equal(read({ byte: 0, bytelength: 8 }, 'FFFFFFFFFFFFFC01').value, 18446744073709550592);
    assert.equal(read({ byte: 0, bytelength: 8, signed: true }, 'FFE0000000000001').value, -9007199254740991);
    assert.equal(read({ byte: 0, bytelength: 8, signed: true, byteorder: 'little' }, '0100000000000080').value, -9223372036854775807);
  });

  test('bit fields across byte boundaries, in both byte orders, with sign', () => {
    assert.equal(read({ byte: 0, bytelength: 2, bit: 6, bitlength: 4 }, '03C0').value, 15);
    assert.equal(read({ byte: 0, bytelength: 2, bit: 6, bitlength: 4, byteorder: 'little' }, 'C003').value, 15);
    assert.equal(read({ byte: 0, bytelength: 2, bit: 6, bitlength: 4, signed: true }, '03C0').value, -1);
    assert.equal(read({ byte: 0, bytelength: 2, bit: 6, bitlength: 4, signed: true }, '01C0').value, 7);
    assert.equal(read({ byte: 0, bytelength: 8, bit: 60, bitlength: 4 }, 'F000000000000000').value, 15);
    assert.equal(read({ byte: 0, bytelength: 8, bit: 0, bitlength: 64, signed: true }, 'FFFFFFFFFFFFFFFE').value, -2);
    assert.equal(read({ byte: 0, bytelength: 6, bit: 47, bitlength: 1 }, '800000000000').value, 1);
    assert.equal(read({ byte: 0, bitlength: 3 }, 'FD').value, 5, 'bitlength alone implies bit 0');
    assert.equal(read({ byte: 0, bit: 2 }, '04').value, 1, 'bit alone implies bitlength 1');
  });

  test('number with a non-float length reads an integer', () => {
    assert.equal(read({ byte: 0, bytelength: 3, type: 'number' }, '010203').value, 0x010203);
    assert.equal(read({ byte: 0, bytelength: 1, type: 'float', signed: true }, 'FF').value, -1);
  });

  test('type names are case-insensitive; uint ignores signed with a warning', () => {
    assert.equal(read({ byte: 0, type: 'INTEGER' }, 'FF').value, 255);
    const result = loadAbcl({ sense: [{ asset: 'v', value: { byte: 0, type: 'uint', signed: true } }] });
    assert.equal(result.warnings.length, 1);
    assert.equal(decodeAbcl(result.doc!, hex('FF')).states.v!.value, 255);
  });
});

describe('floats, booleans, strings, hexstrings', () => {
  test('binary16: normal, subnormal, negative zero, max; NaN and infinity skip with a warning', () => {
    assert.equal(read({ byte: 0, bytelength: 2, type: 'number' }, '3C00').value, 1);
    assert.equal(read({ byte: 0, bytelength: 2, type: 'number' }, 'C000').value, -2);
    assert.equal(read({ byte: 0, bytelength: 2, type: 'number' }, '0001').value, 2 ** -24);
    assert.equal(read({ byte: 0, bytelength: 2, type: 'number' }, '03FF').value, 1023 * 2 ** -24);
    assert.equal(read({ byte: 0, bytelength: 2, type: 'number' }, '7BFF').value, 65504);
    assert.equal(read({ byte: 0, bytelength: 2, type: 'number', byteorder: 'little' }, '003C').value, 1);
    assert.deepEqual(read({ byte: 0, bytelength: 2, type: 'number' }, '7C00'), { value: undefined, warnings: 1 });
    assert.deepEqual(read({ byte: 0, bytelength: 2, type: 'number' }, '7E00'), { value: undefined, warnings: 1 });
  });

  test('binary32 and binary64 in both orders; default number length is 4', () => {
    assert.equal(read({ byte: 0, type: 'number' }, '41AC0000').value, 21.5);
    assert.equal(read({ byte: 0, type: 'float', byteorder: 'little' }, '0000AC41').value, 21.5);
    assert.equal(read({ byte: 0, bytelength: 8, type: 'number' }, '3FB999999999999A').value, 0.1);
    assert.equal(read({ byte: 0, bytelength: 8, type: 'number', byteorder: 'little' }, '9A9999999999B93F').value, 0.1);
    assert.deepEqual(read({ byte: 0, bytelength: 8, type: 'number' }, 'FFF0000000000000'), { value: undefined, warnings: 1 });
    assert.equal(read({ byte: 0, type: 'number', calculation: 'val * 2' }, '41AC0000').value, 43);
  });

  test('booleans: any byte non-zero, or the bit field non-zero', () => {
    assert.equal(read({ byte: 0, bytelength: 3, type: 'boolean' }, '000100').value, true);
    assert.equal(read({ byte: 0, bytelength: 3, type: 'boolean' }, '000000').value, false);
    assert.equal(read({ byte: 0, bytelength: 12, type: 'boolean' }, '00'.repeat(11) + '01').value, true);
    assert.equal(read({ byte: 0, bit: 1, bitlength: 2, type: 'boolean' }, 'F9').value, false);
    assert.equal(read({ byte: 0, bit: 1, bitlength: 2, type: 'boolean' }, '02').value, true);
  });

  test('strings: trailing NULs removed, inner NULs kept, invalid UTF-8 replaced, all-zero is ""', () => {
    assert.equal(read({ byte: 0, bytelength: 6, type: 'string' }, '610062000000').value, 'a\u0000b');
    assert.equal(read({ byte: 0, bytelength: 3, type: 'string' }, 'C328FF').value, '\uFFFD(\uFFFD');
    assert.equal(read({ byte: 0, bytelength: 2, type: 'string' }, '0000').value, '');
    assert.equal(read({ byte: 0, bytelength: 4, type: 'string' }, 'E282AC21').value, '€!');
    assert.equal(read({ byte: 0, bytelength: 2, type: 'string', byteorder: 'little' }, '6162').value, 'ab');
  });

  test('hexstrings are upper case and reversed for little endian', () => {
    assert.equal(read({ byte: 1, bytelength: 3, type: 'hexstring' }, '00ab0cde').value, 'AB0CDE');
    assert.equal(read({ byte: 1, bytelength: 3, type: 'hexstring', byteorder: 'little' }, '00ab0cde').value, 'DE0CAB');
  });
});

describe('out-of-range reads', () => {
  test('integers, floats and booleans past the end skip with one warning naming the asset and bytes', () => {
    for (const selector of [{ byte: 3 }, { byte: 2, bytelength: 2 }, { byte: 0, type: 'number' }, { byte: 3, type: 'boolean' }]) {
      const result = decodeAbcl(mustLoad({ sense: [{ asset: 'pressure', value: selector }] }), hex('010203'));
      assert.deepEqual(result.states, {});
      assert.equal(result.warnings.length, 1);
      assert.match(result.warnings[0]!, /pressure/);
      assert.match(result.warnings[0]!, /bytes \d+\.\.\d+/);
    }
  });

  test('strings truncate with a warning; with no byte available they skip', () => {
    assert.deepEqual(read({ byte: 1, bytelength: 8, type: 'string' }, '006162'), { value: 'ab', warnings: 1 });
    assert.deepEqual(read({ byte: 3, bytelength: 2, type: 'string' }, '006162'), { value: undefined, warnings: 1 });
    assert.deepEqual(read({ byte: 3, bytelength: 2, type: 'hexstring' }, '006162'), { value: undefined, warnings: 1 });
    assert.deepEqual(read({ byte: 0, type: 'string' }, ''), { value: undefined, warnings: 1 });
  });

  test('a later mapping replaces an earlier one; a skipped one keeps the earlier value', () => {
    const doc = mustLoad({ sense: [{ asset: 'a', value: { byte: 0 } }, [{ asset: 'a', value: { byte: 5 } }], { asset: 'b', value: 1 }, { asset: 'b', value: 2 }] });
    const result = decodeAbcl(doc, hex('07'));
    assert.deepEqual(result.states, { a: { value: 7 }, b: { value: 2 } });
    assert.equal(result.warnings.length, 1);
  });

  test('the input must be bytes or a JSON object; a document without sense cannot decode', () => {
    const doc = mustLoad({ sense: [] });
    assert.equal(decodeAbcl(doc, [1, 2] as never).errors.length, 1);
    assert.equal(decodeAbcl(doc, null as never).errors.length, 1);
    assert.equal(decodeAbcl(mustLoad({ actuate: [] }), hex('00')).errors.length, 1);
  });
});

describe('calculations', () => {
  test('the worked calculation examples with val = 7', () => {
    const cases: Array<[string, number]> = [
      ['val + 3 * 2', 13], ['(val + 3) * 2', 20], ['val / 2 / 2', 1.75], ['0x10 - val', 9], ['.5 * val', 3.5], ['2e1 + val', 27], ['max(val, 12)', 12],
    ];
    for (const [expression, expected] of cases) assert.equal(calc(expression, 7), expected, expression);
  });

  test('precedence, associativity, unary operators, remainder sign, functions', () => {
    assert.equal(calc('val - 4 - 1', 7), 2);
    assert.equal(calc('- -val', 7), 7);
    assert.equal(calc('2 * -val', 7), -14);
    assert.equal(calc('-val * 2 + +3', 7), -11);
    assert.equal(calc('-8 % 3', 0), -2);
    assert.equal(calc('val % 4 * 2', 7), 6);
    assert.equal(calc('round(0.5)', 0), 1);
    assert.equal(calc('round(-1.5)', 0), -2);
    assert.equal(calc('round(-1.4)', 0), -1);
    assert.equal(calc('round(2.5)', 0), 3);
    assert.equal(calc('floor(-1.5) + ceil(1.2) + abs(-3)', 0), 3);
    assert.equal(calc('min(5, val, 9) + max(1)', 7), 6);
    assert.equal(calc('pow(2, 10)', 0), 1024);
    assert.equal(calc(' \t( val\r\n+1 )', 1), 2);
    assert.equal(calc('1E2 + 0X1f + 1.5e-1', 0), 131.15);
  });

  test('failures: division or remainder by zero, non-finite intermediates', () => {
    for (const expression of ['val / 0', 'val % 0', '1 / (val - 7)', 'pow(2, 2000)', 'pow(-8, 1/3)', 'min(pow(10, 400), 1)', 'pow(10, 200) * pow(10, 200) - 1']) {
      assert.ok(Number.isNaN(calc(expression, 7)), expression);
    }
    const result = decodeAbcl(mustLoad({ sense: [{ asset: 'x', value: { byte: 0, calculation: '100 / val' } }] }), hex('00'));
    assert.deepEqual(result.states, {});
    assert.equal(result.warnings.length, 1);
  });

  test('syntax errors are load errors with the position', () => {
    for (const expression of ['2val', '1.2.3', 'val +', 'foo(1)', 'Val', 'round(1, 2)', 'pow(1)', 'min()', '1e400', '0x', 'val ** 2', '(val', 'val)', '', 'round', 'val(1)', '$', '('.repeat(500) + 'val' + ')'.repeat(500)]) {
      const parsed = parseExpression(expression);
      assert.equal(parsed.ok, false, expression);
      const problems = loadProblems({ sense: [{ asset: 'x', value: { byte: 0, calculation: expression } }] });
      assert.equal(problems.errors.length, 1, expression);
      assert.match(problems.errors[0]!, /^sense\[0\]\.value\.calculation /);
    }
    assert.match((parseExpression('val + foo') as { error: string }).error, /position 7/);
  });

  test('calculation results are not converted back to the declared type', () => {
    assert.equal(read({ byte: 0, type: 'integer', calculation: 'val / 10' }, '7B').value, 12.3);
  });
});

describe('switch', () => {
  const doc = mustLoad({
    sense: [
      {
        switch: { byte: 0, calculation: 'val * 2' },
        on: [
          { case: '2', do: [{ asset: 'string_two', value: true }] },
          { case: 2, do: [{ asset: 'number_two', value: true }] },
          { case: 2, do: [{ asset: 'never', value: true }] },
          { case: true, do: [{ asset: 'bool', value: true }] },
          { case: 4, do: [[{ switch: '$payloadLength', on: [{ case: 3, do: [{ asset: 'nested', value: { byte: 2 } }] }] }]] },
          { case: '$default', do: [{ asset: 'default', value: true }] },
        ],
      },
    ],
  });
  test('strict typing, first match, repeats never run', () => {
    assert.deepEqual(decodeAbcl(doc, hex('01')).states, { number_two: { value: true } });
  });
  test('nested switch on the payload length', () => {
    assert.deepEqual(decodeAbcl(doc, hex('0200FF')).states, { nested: { value: 255 } });
    assert.deepEqual(decodeAbcl(doc, hex('0200')).states, {});
  });
  test('no match runs $default; a switch value out of range considers only $default, with a warning', () => {
    assert.deepEqual(decodeAbcl(doc, hex('09')).states, { default: { value: true } });
    const empty = decodeAbcl(doc, hex(''));
    assert.deepEqual(empty.states, { default: { value: true } });
    assert.equal(empty.warnings.length, 1);
  });
  test('string switch values; a string switch selector past the end is out of range (no truncation)', () => {
    const strings = mustLoad({ sense: [{ switch: { byte: 0, bytelength: 2, type: 'string' }, on: [{ case: 'ok', do: [{ asset: 'ok', value: 1 }] }, { case: '$default', do: [{ asset: 'other', value: 1 }] }] }] });
    assert.deepEqual(decodeAbcl(strings, hex('6F6B')).states, { ok: { value: 1 } });
    const short = decodeAbcl(strings, hex('6F'));
    assert.deepEqual(short.states, { other: { value: 1 } });
    assert.equal(short.warnings.length, 1);
  });
  test('a failed switch calculation and $payloadLength on JSON consider only $default', () => {
    const failing = mustLoad({ sense: [{ switch: { byte: 0, calculation: '1 / val' }, on: [{ case: '$default', do: [{ asset: 'd', value: 1 }] }] }] });
    assert.equal(decodeAbcl(failing, hex('00')).warnings.length, 1);
    const length = mustLoad({ sense: [{ switch: '$payloadLength', on: [{ case: 0, do: [{ asset: 'zero', value: 1 }] }, { case: '$default', do: [{ asset: 'd', value: 1 }] }] }] });
    const result = decodeAbcl(length, {});
    assert.deepEqual(result.states, { d: { value: 1 } });
    assert.equal(result.warnings.length, 1);
  });
  test('load rules: second $default is an error, repeats warn, bad case and missing do are errors', () => {
    assert.equal(loadProblems({ sense: [{ switch: { byte: 0 }, on: [{ case: '$default', do: [] }, { case: '$default', do: [] }] }] }).errors.length, 1);
    assert.deepEqual(loadProblems({ sense: [{ switch: { byte: 0 }, on: [{ case: 1, do: [] }, { case: 1.0, do: [] }] }] }), { errors: [], warnings: ['sense[0].on[1].case repeats the case 1; it can never run'] });
    assert.equal(loadProblems({ sense: [{ switch: { byte: 0 }, on: [{ case: null, do: [] }, { do: [] }, { case: 1 }, 5, { case: 2, do: {} }] }] }).errors.length, 5);
    assert.equal(loadProblems({ sense: [{ switch: 'payloadLength', on: [] }] }).errors.length, 1);
    assert.equal(loadProblems({ sense: [{ switch: { byte: 0 } }] }).errors.length, 1);
    assert.equal(loadProblems({ sense: [{ switch: { byte: 0 }, on: [], other: 1 }] }).warnings.length, 1);
  });
});

describe('JSON mode', () => {
  function jsonRead(selector: Record<string, unknown>, input: Record<string, unknown>) {
    const result = decodeAbcl(mustLoad({ sense: [{ asset: 'v', value: selector }] }), input as never);
    return { value: result.states.v?.value, warnings: result.warnings.length };
  }
  test('path steps: names, digit names on arrays and objects, [n] on arrays, objects and integers', () => {
    const input = { a: { b: [10, 20, { c: 'x' }] }, o: { '2': 'two' }, n: -2, 'we ird': { '': 1 } };
    assert.equal(jsonRead({ json: 'a.b.1' }, input).value, 20);
    assert.equal(jsonRead({ json: 'a.b[2].c' }, input).value, 'x');
    assert.equal(jsonRead({ json: 'o.2' }, input).value, 'two');
    assert.equal(jsonRead({ json: 'o[2]' }, input).value, 'two');
    assert.equal(jsonRead({ json: 'n[0]' }, input).value, 0);
    assert.equal(jsonRead({ json: 'n[1]' }, input).value, 1);
    assert.equal(jsonRead({ json: 'n[60]' }, input).value, 1);
    assert.equal(jsonRead({ json: 'we ird' }, input).value !== undefined, true);
    assert.deepEqual(jsonRead({ json: 'a' }, input).value, { b: [10, 20, { c: 'x' }] });
    for (const path of ['a.b.5', 'a.x', 'a.b[2].c[0]', 'missing', 'a.b.length', 'o.toString']) assert.deepEqual(jsonRead({ json: path }, input), { value: undefined, warnings: 1 }, path);
  });
  test('explicit type conversions and their failures', () => {
    const input = { n: 42, t: true, f: false, s: 'abc', z: null, o: {} };
    const cases: Array<[string, string, unknown]> = [
      ['n', 'integer', 42], ['t', 'number', 1], ['f', 'int', 0], ['s', 'integer', undefined], ['z', 'number', undefined],
      ['n', 'boolean', true], ['t', 'boolean', true], ['s', 'boolean', undefined],
      ['n', 'string', '42'], ['f', 'string', 'false'], ['s', 'string', 'abc'], ['o', 'string', undefined],
      ['s', 'hexstring', 'abc'], ['n', 'hexstring', undefined],
    ];
    for (const [path, type, expected] of cases) {
      const result = jsonRead({ json: path, type }, input);
      assert.deepEqual(result.value, expected, `${path} as ${type}`);
      assert.equal(result.warnings, expected === undefined ? 1 : 0);
    }
    assert.equal(jsonRead({ json: 'z' }, input).value, null, 'no conversion without an explicit type');
    assert.deepEqual(jsonRead({ json: 's', calculation: 'val + 1' }, input), { value: undefined, warnings: 1 });
  });
  test('mixed documents: byte selectors on JSON and json selectors on bytes are skipped with a warning', () => {
    const doc = mustLoad({ sense: [{ asset: 'b', value: { byte: 0 } }, { asset: 'j', value: { json: 'x' } }] });
    const onJson = decodeAbcl(doc, { x: 5 });
    assert.deepEqual(onJson.states, { j: { value: 5 } });
    assert.equal(onJson.warnings.length, 1);
    const onBytes = decodeAbcl(doc, hex('05'));
    assert.deepEqual(onBytes.states, { b: { value: 5 } });
    assert.equal(onBytes.warnings.length, 1);
  });
  test('load rules for json selectors', () => {
    assert.equal(loadProblems({ sense: [{ asset: 'v', value: { json: 'a', bytelength: 2, signed: true } }] }).warnings.length, 2);
    for (const path of ['', 'a..b', '.a', 'a.', 'a[x]', 'a]', 5]) assert.equal(loadProblems({ sense: [{ asset: 'v', value: { json: path } }] }).errors.length, 1, String(path));
    assert.equal(loadProblems({ sense: [{ asset: 'v', value: { json: 'a', type: 'string', calculation: 'val' } }] }).errors.length, 1);
  });
});

describe('timestamps', () => {
  function at(selector: Record<string, unknown>, input: Record<string, unknown>) {
    const result = decodeAbcl(mustLoad({ sense: [{ asset: 'v', value: 1, at: selector }] }), input as never);
    return { at: result.states.v!.at, warnings: result.warnings.length };
  }
  test('numbers: seconds below 1e11, otherwise milliseconds, floored', () => {
    assert.deepEqual(at({ json: 't' }, { t: 1600000000 }), { at: '2020-09-13T12:26:40.000Z', warnings: 0 });
    assert.deepEqual(at({ json: 't' }, { t: 1600000000123.9 }), { at: '2020-09-13T12:26:40.123Z', warnings: 0 });
    assert.deepEqual(at({ json: 't' }, { t: 1600000000.5559 }), { at: '2020-09-13T12:26:40.555Z', warnings: 0 });
    assert.deepEqual(at({ json: 't' }, { t: -0.0005 }), { at: '1969-12-31T23:59:59.999Z', warnings: 0 });
    assert.deepEqual(at({ json: 't', calculation: 'val * 1000' }, { t: 1600000000 }), { at: '2020-09-13T12:26:40.000Z', warnings: 0 });
  });
  test('strings: forms, zones, fraction truncation, invalid fields', () => {
    const valid: Array<[string, string]> = [
      ['2021-06-30 23:59:59', '2021-06-30T23:59:59.000Z'], ['2021-06-30', '2021-06-30T00:00:00.000Z'], ['2021-06-30t10:00', '2021-06-30T10:00:00.000Z'],
      ['2021-06-30T10:00:00,123456Z', '2021-06-30T10:00:00.123Z'], ['2021-06-30T10:00:00.5+02:00', '2021-06-30T08:00:00.500Z'],
      ['2021-06-30T10:00:00-0130', '2021-06-30T11:30:00.000Z'], ['2021-06-30T10:00+01', '2021-06-30T09:00:00.000Z'], ['2024-02-29T00:00:00z', '2024-02-29T00:00:00.000Z'],
    ];
    for (const [text, expected] of valid) assert.deepEqual(at({ json: 't' }, { t: text }), { at: expected, warnings: 0 }, text);
    for (const text of ['2021-13-01', '2021-04-31', '2023-02-29', '2021-06-30T24:00', '2021-06-30T10:60', '2021-06-30T10:00:60', '2021-06-30Z', 'yesterday', '2021-6-30']) {
      assert.deepEqual(at({ json: 't' }, { t: text }), { at: undefined, warnings: 1 }, text);
    }
  });
  test('binary at; at out of range keeps the state without at', () => {
    const doc = mustLoad({ sense: [{ asset: 'v', value: { byte: 0 }, at: { byte: 1, bytelength: 4 } }] });
    assert.deepEqual(decodeAbcl(doc, hex('075F5E1000')).states, { v: { value: 7, at: '2020-09-13T12:26:40.000Z' } });
    const short = decodeAbcl(doc, hex('07'));
    assert.deepEqual(short.states, { v: { value: 7 } });
    assert.equal(short.warnings.length, 1);
  });
});

describe('loading', () => {
  test('JSONC: comments anywhere, slashes inside strings, trailing comment lines, BOM', () => {
    const text = '\uFEFF// lead\n{ /* c */ "name": "see http://host/a//b", "sense": [ // x\n {"asset": "a", "value": 1} ] }\n// end 1\n// end 2';
    const result = loadAbcl(text);
    assert.deepEqual(result.errors, []);
    assert.equal(result.doc!.name, 'see http://host/a//b');
  });
  test('JSONC syntax errors with line and column', () => {
    const cases: Array<[string, number, number]> = [
      ['{"sense": [],}', 1, 14], ["{'sense': []}", 1, 2], ['{sense: []}', 1, 2], ['{"sense": NaN}', 1, 11], ['{"sense": []} x', 1, 15],
      ['{"sense": []} /', 1, 15], ['{"sense": [] /* open', 1, 14], ['{\r\n"sense": [1,]\r\n}', 2, 13], ['{\r"a":\r\r  01}', 4, 4], ['', 1, 1],
    ];
    for (const [text, line, column] of cases) {
      const result = loadAbcl(text);
      assert.equal(result.ok, false, text);
      assert.equal(result.errors.length, 1, text);
      assert.match(result.errors[0]!, new RegExp(`^syntax error at line ${line}, column ${column}: `), text);
    }
  });
  test('duplicate member names: the last wins', () => {
    const doc = mustLoad('{"sense": [{"asset": "a", "value": 1, "value": 2}]}');
    assert.deepEqual(decodeAbcl(doc, hex('')).states, { a: { value: 2 } });
  });
  test('top level: object required, a block required, free-text keys and unknown keys warn', () => {
    assert.equal(loadProblems('[]').errors.length, 1);
    assert.equal(loadProblems({ name: 'x' }).errors.length, 1);
    assert.deepEqual(loadProblems({ sense: [], name: 1, comment: {}, version: 2, vendor: 'x' }).warnings.length, 4);
    assert.equal(loadProblems({ sense: {} }).errors.length, 1);
  });
  test('every problem is reported with its JSON path', () => {
    const problems = loadProblems({
      sense: [
        { asset: 'a', value: { byte: 0, bytelength: 0 } },
        [{ asset: 'b', value: { byte: 1.5 } }],
        { asset: 'c', value: { 'sensor-1': { byte: 0, type: 'weird' } } },
        { asset: 'd', value: { x: [1] } },
        { asset: 'e', value: { type: 'integer', bytelength: 2 } },
        { asset: 'f', value: { byte: 0, json: 'a' } },
        { asset: true, value: 1 },
        { value: 1 },
        { asset: 'g' },
        { asset: 'h', value: 1, field: { byte: 0 } },
        { asset: 'i', value: 1, at: 5 },
        { asset: 'j', value: 1, at: { json: 'x', bogus: 1 } },
        5,
        null,
        { other: 1 },
        { asset: 'k', value: { byte: 0, signed: 'yes' } },
        { asset: 'l', value: { byte: 0, byteorder: 'middle' } },
        { asset: 'm', value: { byte: 0, bytelength: 9 } },
        { asset: 'n', value: { byte: 0, type: 'string', bit: 1 } },
        { asset: 'o', value: { byte: 0, bytelength: 4, type: 'number', bitlength: 2 } },
        { asset: 'p', value: { byte: 0, bit: 6, bitlength: 3 } },
        { asset: 'q', value: { byte: 0, type: 'boolean', calculation: 'val' } },
        { asset: 'r', value: { byte: 0, calculation: 5 } },
        { asset: 's', value: { byte: 0, bytelength: 10, type: 'boolean', bit: 0 } },
      ],
    });
    const expectedPrefixes = [
      'sense[0].value.bytelength ', 'sense[1][0].value.byte ', 'sense[2].value["sensor-1"].type ', 'sense[3].value.x ', 'sense[4].value ', 'sense[5].value ',
      'sense[6].asset ', 'sense[7] ', 'sense[8] ', 'sense[9].field ', 'sense[10].at ', 'sense[12] ', 'sense[13] ', 'sense[14] ', 'sense[15].value.signed ',
      'sense[16].value.byteorder ', 'sense[17].value.bytelength ', 'sense[18].value ', 'sense[19].value ', 'sense[20].value ', 'sense[21].value.calculation ',
      'sense[22].value.calculation ', 'sense[23].value ',
    ];
    assert.equal(problems.errors.length, expectedPrefixes.length, problems.errors.join('\n'));
    expectedPrefixes.forEach((prefix, index) => assert.ok(problems.errors[index]!.startsWith(prefix), `${problems.errors[index]} should start with ${prefix}`));
    assert.deepEqual(problems.warnings.map((w) => w.split(' ')[0]), ['sense[11].at.bogus']);
  });
  test('warnings: small byte order, signed without effect, little-endian string, unknown keys, non-string comments', () => {
    const problems = loadProblems({
      sense: [
        { asset: 'a', value: { byte: 0, byteorder: 'SMALL' } },
        { asset: 'b', value: { byte: 0, type: 'string', signed: true, byteorder: 'little' } },
        { asset: 'c', value: { byte: 0, unit: 'x' }, comment: 5, extra: 1 },
        { comment: 7 },
        { asset: 'd', value: { byte: 0, bytelength: 4, type: 'number', signed: 'true' } },
      ],
    });
    assert.deepEqual(problems.errors, []);
    assert.equal(problems.warnings.length, 8, problems.warnings.join('\n'));
  });
  test('numeric asset names become String(n); constants and empty objects are values', () => {
    const doc = mustLoad({ sense: [{ asset: 9, value: 'x' }, { asset: 1.5, value: {} }, { asset: 'n', value: null }, { asset: 'o', value: { comment: 'kept', k: false } }] });
    assert.deepEqual(decodeAbcl(doc, hex('')).states, { '9': { value: 'x' }, '1.5': { value: {} }, n: { value: null }, o: { value: { comment: 'kept', k: false } } });
  });
  test('an object whose selector-looking keys hold objects is an object descriptor', () => {
    const doc = mustLoad({ sense: [{ asset: 'a', value: { type: { byte: 0 }, bit: { byte: 1 } } }] });
    assert.deepEqual(decodeAbcl(doc, hex('0102')).states, { a: { value: { type: 1, bit: 2 } } });
  });
  test('__proto__ as an asset or member name stays an own member', () => {
    const doc = mustLoad('{"sense": [{"asset": "__proto__", "value": {"__proto__": {"byte": 0}}}]}');
    const states = decodeAbcl(doc, hex('05')).states;
    assert.deepEqual(Object.keys(states), ['__proto__']);
    assert.equal(Object.getPrototypeOf(states), Object.prototype);
  });
  test('pathologically nested documents are refused, not thrown', () => {
    const deep = '{"sense": ' + '['.repeat(20000) + ']'.repeat(20000) + '}';
    const result = loadAbcl(deep);
    assert.equal(typeof result.ok, 'boolean');
  });
});

describe('actuate', () => {
  test('integers: big-endian default, little endian, signed two\'s complement, 7–8 bytes', () => {
    assert.equal(encode({ byte: 0, bytelength: 2 }, 258).hex, '0102');
    assert.equal(encode({ byte: 0, bytelength: 2, byteorder: 'little' }, 258).hex, '0201');
    assert.equal(encode({ byte: 0, bytelength: 2, signed: true }, -2).hex, 'FFFE');
    assert.equal(encode({ byte: 0, bytelength: 8 }, 2 ** 64 - 2048).hex, 'FFFFFFFFFFFFF800');
    assert.equal(encode({ byte: 0, bytelength: 8, signed: true }, -(2 ** 63)).hex, '8000000000000000');
    assert.equal(encode({ byte: 0, bytelength: 7, signed: true, byteorder: 'little' }, -2).hex, 'FEFFFFFFFFFFFF');
    assert.equal(encode({ byte: 0 }, true).hex, '01');
  });
  test('range checks refuse without clamping or wrap-around', () => {
    assert.deepEqual(encode({ byte: 0 }, 256), { hex: '', warnings: 0, errors: 1 });
    assert.deepEqual(encode({ byte: 0 }, -1), { hex: '', warnings: 0, errors: 1 });
    assert.deepEqual(encode({ byte: 0, signed: true }, 128), { hex: '', warnings: 0, errors: 1 });
    assert.deepEqual(encode({ byte: 0, signed: true }, -128).hex, '80');
    assert.deepEqual(encode({ byte: 0, bytelength: 8 }, 2 ** 64), { hex: '', warnings: 0, errors: 1 });
    assert.deepEqual(encode({ byte: 0, bit: 0, bitlength: 3 }, 8), { hex: '', warnings: 0, errors: 1 });
    for (const bad of ['1', null, [1], { a: 1 }, Number.NaN]) assert.equal(encode({ byte: 0 }, bad).errors, 1);
  });
  test('rounding: halves away from zero, warnings only beyond 1e-9', () => {
    assert.deepEqual(encode({ byte: 0 }, 7.4), { hex: '07', warnings: 1, errors: 0 });
    assert.deepEqual(encode({ byte: 0 }, 2.5), { hex: '03', warnings: 1, errors: 0 });
    assert.deepEqual(encode({ byte: 0, signed: true }, -2.5), { hex: 'FD', warnings: 1, errors: 0 });
    assert.deepEqual(encode({ byte: 0, calculation: 'val * 100' }, 0.57), { hex: '39', warnings: 0, errors: 0 });
  });
  test('calculation failures are errors', () => {
    assert.deepEqual(encode({ byte: 0, calculation: '1 / val' }, 0), { hex: '', warnings: 0, errors: 1 });
  });
  test('floats: binary16/32/64, ties to even, overflow is an error', () => {
    assert.equal(encode({ byte: 0, type: 'number' }, 21.5).hex, '41AC0000');
    assert.equal(encode({ byte: 0, type: 'number', byteorder: 'little' }, 21.5).hex, '0000AC41');
    assert.equal(encode({ byte: 0, bytelength: 8, type: 'float' }, 0.1).hex, '3FB999999999999A');
    assert.equal(encode({ byte: 0, bytelength: 2, type: 'number' }, 1).hex, '3C00');
    assert.equal(encode({ byte: 0, bytelength: 2, type: 'number' }, 65504).hex, '7BFF');
    assert.equal(encode({ byte: 0, bytelength: 2, type: 'number' }, 65519).hex, '7BFF');
    assert.equal(encode({ byte: 0, bytelength: 2, type: 'number' }, 2 ** -24).hex, '0001');
    assert.equal(encode({ byte: 0, bytelength: 2, type: 'number' }, 1 + 2 ** -11).hex, '3C00', 'tie goes to even');
    assert.equal(encode({ byte: 0, bytelength: 2, type: 'number' }, 1 + 3 * 2 ** -11).hex, '3C02', 'tie goes to even');
    assert.equal(encode({ byte: 0, bytelength: 2, type: 'number' }, -0).hex, '8000');
    assert.equal(encode({ byte: 0, bytelength: 2, type: 'number' }, 65520).errors, 1);
    assert.equal(encode({ byte: 0, type: 'number' }, 1e39).errors, 1);
    assert.equal(encode({ byte: 0, type: 'number' }, 'x').errors, 1);
  });
  test('booleans: true sets every bit of the field; numbers accepted', () => {
    assert.equal(encode({ byte: 0, bytelength: 2, type: 'boolean' }, true).hex, 'FFFF');
    assert.equal(encode({ byte: 0, bit: 2, bitlength: 3, type: 'boolean' }, true).hex, '1C');
    assert.equal(encode({ byte: 0, type: 'boolean' }, 0).hex, '00');
    assert.equal(encode({ byte: 0, type: 'boolean' }, 'yes').errors, 1);
  });
  test('strings pad with zeros; too long is an error; hexstrings need exactly 2n digits', () => {
    assert.equal(encode({ byte: 0, bytelength: 4, type: 'string' }, 'é').hex, 'C3A90000');
    assert.equal(encode({ byte: 0, bytelength: 1, type: 'string' }, 'é').errors, 1);
    assert.equal(encode({ byte: 0, bytelength: 2, type: 'hexstring' }, 'a1b2').hex, 'A1B2');
    assert.equal(encode({ byte: 0, bytelength: 2, type: 'hexstring', byteorder: 'little' }, 'A1B2').hex, 'B2A1');
    for (const bad of ['A1', 'A1B2C3', 'G1B2', 12]) assert.equal(encode({ byte: 0, bytelength: 2, type: 'hexstring' }, bad).errors, 1);
  });
  test('bit fields OR together and keep other bits; whole-byte writes overwrite; padding to the furthest field', () => {
    const doc = mustLoad({
      actuate: [
        { const: 0xf0, field: { byte: 0 } },
        { asset: 'low', field: { byte: 0, bit: 0, bitlength: 2 } },
        { asset: 'wide', field: { byte: 1, bytelength: 2, bit: 6, bitlength: 4 } },
        { asset: 'wide_le', field: { byte: 3, bytelength: 2, bit: 6, bitlength: 4, byteorder: 'little' } },
        { asset: 'unused', field: { byte: 7 } },
      ],
    });
    const result = encodeAbcl(doc, { low: 3, wide: 15, wide_le: 15 }, {});
    assert.equal(toHex(result.bytes), 'F303C0C00300' + '0000');
    assert.equal(result.warnings.length, 1, 'unused has no value');
    const overwrite = mustLoad({ actuate: [{ asset: 'flag', field: { byte: 0, bit: 7, type: 'boolean' } }, { const: 1, field: { byte: 0 } }] });
    assert.equal(toHex(encodeAbcl(overwrite, { flag: true }).bytes), '01');
    const bitAfter = mustLoad({ actuate: [{ const: 0xff, field: { byte: 0 } }, { asset: 'b', field: { byte: 0, bit: 1, bitlength: 2 } }] });
    assert.equal(toHex(encodeAbcl(bitAfter, { b: 0 }).bytes), 'F9');
    const big = mustLoad({ actuate: [{ asset: 'a', field: { byte: 0, bytelength: 8, bit: 60, bitlength: 4 } }, { asset: 'b', field: { byte: 0, bytelength: 8, bit: 0, bitlength: 1 } }] });
    assert.equal(toHex(encodeAbcl(big, { a: 9, b: 1 }).bytes), '9000000000000001');
  });
  test('command members: unused ones warn, none used refuses, missing ones come from previous', () => {
    const doc = mustLoad({ actuate: [{ asset: 'a', field: { byte: 0 } }, { asset: 9, field: { byte: 1 } }] });
    const extra = encodeAbcl(doc, { a: 1, '9': 2, z: 3 });
    assert.equal(toHex(extra.bytes), '0102');
    assert.equal(extra.warnings.length, 1);
    const none = encodeAbcl(doc, { z: 3 });
    assert.deepEqual([none.bytes.length, none.errors.length], [0, 1]);
    assert.equal(encodeAbcl(doc, {}).errors.length, 1);
    assert.equal(toHex(encodeAbcl(doc, { a: 1 }, { '9': 7, a: 5 }).bytes), '0107');
    const refusedTwice = encodeAbcl(doc, { a: 300, '9': -1 });
    assert.deepEqual([refusedTwice.bytes.length, refusedTwice.errors.length], [0, 2]);
  });
  test('const fields: a string const into an integer field refuses the command', () => {
    const doc = mustLoad({ actuate: [{ const: 'x', field: { byte: 0 } }, { asset: 'a', field: { byte: 1 } }] });
    assert.equal(encodeAbcl(doc, { a: 1 }).errors.length, 1);
  });
  test('load errors of actuate', () => {
    const problems = loadProblems({
      actuate: [
        { switch: { byte: 0 }, on: [] },
        { asset: 'a', const: 1, field: { byte: 0 } },
        { field: { byte: 0 } },
        { asset: 'b' },
        { const: null, field: { byte: 0 } },
        { asset: 'c', value: 1, field: { byte: 0 } },
        { asset: 'd', field: { json: 'x' } },
        { asset: 'e', field: { byte: 4095, bytelength: 2 } },
        { asset: 'f', field: 5 },
        { asset: 'g', field: { bytelength: 2 } },
      ],
    });
    assert.equal(problems.errors.length, 11, problems.errors.join('\n'));
    assert.ok(problems.errors[0]!.startsWith('actuate[0].switch '));
    assert.equal(loadProblems({ actuate: [{ asset: 'h', field: { byte: 4094, bytelength: 2 } }, { asset: 'i', field: { byte: 0 }, extra: 1 }] }).warnings.length, 1);
  });
});
