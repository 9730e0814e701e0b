// Argument parsing shared by the commands (README, "Command line"): one option set for the
// management commands, one for the operations commands; `codec` parses its own (its options differ).
import { parseArgs } from 'node:util';
import { loadConfig, type ConfigSources, type OutpostConfig } from '../core/config.js';
import { showFor, type Output, type Show } from './output.js';

/** A mistake in the command line: main prints it with the usage text and exits 2. */
export class UsageError extends Error {}

/** Ours, or node:util parseArgs's (unknown option, missing value). */
export function isUsageError(err: unknown): err is Error {
  return err instanceof UsageError || ((err as { code?: string } | null)?.code?.startsWith('ERR_PARSE_ARGS') ?? false);
}

export function requireArg(positionals: string[], index: number, what: string): string {
  const v = positionals[index];
  if (!v) throw new UsageError(`missing ${what}`);
  return v;
}

/** Every option any management command takes: each accepts them all, as it always has. */
function parseManagementArgs(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      data: { type: 'string' },
      json: { type: 'boolean', default: false },
      name: { type: 'string' },
      title: { type: 'string' },
      is: { type: 'string' },
      profile: { type: 'string' },
      scopes: { type: 'string' },
      uplink: { type: 'string' },
      file: { type: 'string' },
      downlink: { type: 'string' },
      'downlink-file': { type: 'string' },
      port: { type: 'string' },
      id: { type: 'string' },
      gateway: { type: 'string' },
      before: { type: 'string' },
      yes: { type: 'boolean', default: false },
      try: { type: 'boolean', default: false },
      none: { type: 'boolean', default: false },
      limit: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      devaddr: { type: 'string' },
      nwkskey: { type: 'string' },
      appskey: { type: 'string' },
      'fcnt-up': { type: 'string' },
      'fcnt-down': { type: 'string' },
      deveui: { type: 'string' },
      joineui: { type: 'string' },
      appkey: { type: 'string' },
      eui: { type: 'string' },
    },
  });
}

export type ManagementValues = ReturnType<typeof parseManagementArgs>['values'];

/** A management command's parsed line and loaded configuration. */
export interface ManagementArgs {
  /** The whole command line after the program name, for error messages. */
  argv: readonly string[];
  /** The word after the command (`list` in `device list`). */
  sub: string | undefined;
  positionals: string[];
  values: ManagementValues;
  config: OutpostConfig;
  json: boolean;
  show: Show;
  out: Output;
}

/** Parses, then loads the configuration: a bad config file is reported before anything else. */
export function managementArgs(args: string[], argv: readonly string[], out: Output): ManagementArgs {
  const { values, positionals } = parseManagementArgs(args);
  const config = loadConfig({ file: values.config, dataDir: values.data });
  const json = values.json === true;
  return { argv, sub: positionals[0], positionals, values, config, json, show: showFor(json, out), out };
}

export type Verb = (a: ManagementArgs) => number | Promise<number>;

/** Runs the verb `a.sub` names; an unknown one is a usage error (`unknown command: device frob`). */
export function runVerb(a: ManagementArgs, verbs: Record<string, Verb>, unknown = `unknown command: ${a.argv.slice(0, 2).join(' ')}`): number | Promise<number> {
  const verb = a.sub !== undefined && Object.hasOwn(verbs, a.sub) ? verbs[a.sub] : undefined;
  if (!verb) throw new UsageError(unknown);
  return verb(a);
}

/** The operations commands' line (`status`, `doctor`, `backup FILE`, `restore FILE`). */
export function opsArgs(command: string, args: string[]) {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      data: { type: 'string' },
      json: { type: 'boolean', default: false },
      yes: { type: 'boolean', default: false },
    },
  });
  const sources: ConfigSources = { file: values.config, dataDir: values.data };
  /** An operations failure: `outpost <command>: <message>` on stderr; returns the exit code. */
  const fail = (message: string, code = 1) => {
    process.stderr.write(`outpost ${command}: ${message}\n`);
    return code;
  };
  return { values, positionals, sources, json: values.json === true, fail };
}
