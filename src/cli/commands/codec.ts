// `outpost codec check | decode | encode` (README, "Command line"; docs/codecs.md, "Command line"): run a codec file by hand.
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import type { DecodeResult, EncodeResult } from '../../codec/types.js';
import { bytesToHex, hexToBytes } from '../../codec/hex.js';
import { decodeAbcl, encodeAbcl, loadAbcl, type CompiledAbcl } from '../../codec/abcl/index.js';
import { getQuickJSModule, JsCodec, type CodecDirection } from '../../codec/js/index.js';
import { isUsageError, UsageError } from '../args.js';
import type { CliCommand } from '../command.js';
import type { Output } from '../output.js';
import { isJsonObject, type JsonObject } from '../../core/json.js';

const USAGE = `usage:
  outpost codec check FILE [--json]
  outpost codec decode FILE --hex HEX | --text JSON [--port N] [--json]
  outpost codec encode FILE --values '<json map>' [--previous '<json map>'] [--json]
FILE ending in .js is a JavaScript codec; any other file is an ABCL document (JSON with comments).`;

type LoadedCodec =
  | { kind: 'abcl'; doc: CompiledAbcl; warnings: string[] }
  | { kind: 'js'; codec: JsCodec; warnings: string[] }
  | { kind: 'failed'; errors: string[]; warnings: string[] };

async function loadCodecFile(file: string, require: CodecDirection[]): Promise<LoadedCodec> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as Error).message}`);
  }
  if (file.endsWith('.js')) {
    const loaded = JsCodec.load(await getQuickJSModule(), text, { require });
    return loaded.codec ? { kind: 'js', codec: loaded.codec, warnings: loaded.warnings } : { kind: 'failed', errors: loaded.errors, warnings: loaded.warnings };
  }
  const loaded = loadAbcl(text);
  return loaded.doc ? { kind: 'abcl', doc: loaded.doc, warnings: loaded.warnings } : { kind: 'failed', errors: loaded.errors, warnings: loaded.warnings };
}

function parseJsonMap(text: string, option: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError(`${option} must be a JSON object`);
  }
  if (!isJsonObject(value)) throw new UsageError(`${option} must be a JSON object`);
  return value;
}

function printMessages(out: Output, warnings: string[], errors: string[]): void {
  for (const warning of warnings) out(`warning: ${warning}`);
  for (const error of errors) out(`error: ${error}`);
}

async function check(file: string, json: boolean, out: Output): Promise<number> {
  const loaded = await loadCodecFile(file, []);
  const errors = loaded.kind === 'failed' ? loaded.errors : [];
  if (loaded.kind === 'js') loaded.codec.dispose();
  if (json) out(JSON.stringify({ ok: errors.length === 0, warnings: loaded.warnings, errors }));
  else {
    if (loaded.kind === 'js') out(`${file}: JavaScript codec OK (uplink: ${loaded.codec.uplinkConvention ?? 'none'}, downlink: ${loaded.codec.downlinkConvention ?? 'none'})`);
    else if (loaded.kind === 'abcl') out(`${file}: ABCL document OK (${loaded.doc.sense ? 'sense' : ''}${loaded.doc.sense && loaded.doc.actuate ? ' + ' : ''}${loaded.doc.actuate ? 'actuate' : ''})`);
    else out(`${file}: INVALID`);
    printMessages(out, loaded.warnings, errors);
  }
  return errors.length === 0 ? 0 : 1;
}

function printDecode(out: Output, result: DecodeResult, json: boolean): void {
  if (json) {
    out(JSON.stringify({ states: result.states, warnings: result.warnings, errors: result.errors }));
    return;
  }
  const names = Object.keys(result.states);
  if (names.length === 0 && result.errors.length === 0) out('(no states)');
  for (const name of names) {
    const state = result.states[name]!;
    out(`${name} = ${JSON.stringify(state.value)}${state.at === undefined ? '' : `  at ${state.at}`}`);
  }
  printMessages(out, result.warnings, result.errors);
}

function printEncode(out: Output, result: EncodeResult, json: boolean): void {
  const hex = bytesToHex(result.bytes);
  if (json) {
    const shape: Record<string, unknown> = { bytes: hex };
    if (result.fPort !== undefined) shape.fPort = result.fPort;
    if (result.confirmed !== undefined) shape.confirmed = result.confirmed;
    out(JSON.stringify({ ...shape, warnings: result.warnings, errors: result.errors }));
    return;
  }
  if (result.errors.length === 0) out(`bytes: ${hex === '' ? '(empty)' : hex}${result.fPort === undefined ? '' : `  port ${result.fPort}`}${result.confirmed === undefined ? '' : `  confirmed ${result.confirmed}`}`);
  else out('refused: nothing would be sent');
  printMessages(out, result.warnings, result.errors);
}

function failedLoad(loaded: { errors: string[]; warnings: string[] }, json: boolean, out: Output, shape: 'decode' | 'encode'): number {
  if (json) out(JSON.stringify(shape === 'decode' ? { states: {}, warnings: loaded.warnings, errors: loaded.errors } : { bytes: '', warnings: loaded.warnings, errors: loaded.errors }));
  else {
    out('the codec does not load');
    printMessages(out, loaded.warnings, loaded.errors);
  }
  return 1;
}

async function decode(file: string, options: { hex?: string; text?: string; port?: string; json: boolean }, out: Output): Promise<number> {
  if ((options.hex === undefined) === (options.text === undefined)) throw new UsageError('decode needs exactly one of --hex and --text');
  let port: number | undefined;
  if (options.port !== undefined) {
    port = Number(options.port);
    if (!Number.isInteger(port) || port < 0 || port > 255) throw new UsageError('--port must be an integer from 0 to 255');
  }
  let payload: Uint8Array | JsonObject;
  if (options.hex !== undefined) {
    const bytes = hexToBytes(options.hex.replace(/[\s:]/g, ''));
    if (bytes === undefined) throw new UsageError('--hex must be hex digits of even length');
    payload = bytes;
  } else {
    if (file.endsWith('.js')) throw new UsageError('--text (JSON mode) works with ABCL documents; give a JS codec its bytes with --hex');
    payload = parseJsonMap(options.text!, '--text');
  }
  const loaded = await loadCodecFile(file, ['uplink']);
  if (loaded.kind === 'failed') return failedLoad(loaded, options.json, out, 'decode');
  let result: DecodeResult;
  if (loaded.kind === 'js') {
    result = loaded.codec.decode(payload as Uint8Array, { fPort: port });
    loaded.codec.dispose();
  } else result = decodeAbcl(loaded.doc, payload);
  result = { ...result, warnings: [...loaded.warnings, ...result.warnings] };
  printDecode(out, result, options.json);
  return result.errors.length === 0 ? 0 : 1;
}

async function encode(file: string, options: { values?: string; previous?: string; json: boolean }, out: Output): Promise<number> {
  if (options.values === undefined) throw new UsageError('encode needs --values');
  const values = parseJsonMap(options.values, '--values');
  const previous = options.previous === undefined ? undefined : parseJsonMap(options.previous, '--previous');
  const loaded = await loadCodecFile(file, ['downlink']);
  if (loaded.kind === 'failed') return failedLoad(loaded, options.json, out, 'encode');
  let result: EncodeResult;
  if (loaded.kind === 'js') {
    result = loaded.codec.encode(values);
    loaded.codec.dispose();
  } else result = encodeAbcl(loaded.doc, values, previous);
  result = { ...result, warnings: [...loaded.warnings, ...result.warnings] };
  printEncode(out, result, options.json);
  return result.errors.length === 0 ? 0 : 1;
}

/** `outpost codec …`: its usage errors are its own (its usage text on stdout, exit 2). */
export const command: CliCommand = {
  usage: '  codec check|decode|encode ...                      see docs/codecs.md',
  run: (args, _argv, out) => runCodecCommand(args, out),
};

/** Runs `outpost codec …` with `args` after the word `codec`; returns the exit code (0 ok, 1 codec errors, 2 usage). */
export async function runCodecCommand(args: string[], out: Output): Promise<number> {
  try {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: {
        json: { type: 'boolean', default: false },
        hex: { type: 'string' },
        text: { type: 'string' },
        port: { type: 'string' },
        values: { type: 'string' },
        previous: { type: 'string' },
        data: { type: 'string' },
        config: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
    const [subcommand, file, ...extra] = positionals;
    if (values.help) {
      out(USAGE);
      return 0;
    }
    if (subcommand === undefined || file === undefined || extra.length > 0) throw new UsageError('expected a subcommand and one FILE');
    switch (subcommand) {
      case 'check':
        return await check(file, values.json, out);
      case 'decode':
        return await decode(file, { hex: values.hex, text: values.text, port: values.port, json: values.json }, out);
      case 'encode':
        return await encode(file, { values: values.values, previous: values.previous, json: values.json }, out);
      default:
        throw new UsageError(`unknown subcommand "${subcommand}"`);
    }
  } catch (error) {
    if (isUsageError(error)) {
      out(`error: ${(error as Error).message}`);
      out(USAGE);
      return 2;
    }
    throw error;
  }
}
