// Runs a build tool and fails with what was being done and the tool's own output when it fails.
import { spawnSync } from 'node:child_process';

/** `env` replaces the environment; a key set to undefined is left out. */
export function run(command, args, { what, cwd, env, input } = {}) {
  const childEnv = Object.fromEntries(Object.entries(env ?? process.env).filter(([, v]) => v !== undefined));
  const result = spawnSync(command, args, { cwd, env: childEnv, input, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  if (result.error) throw new Error(`${what ?? command}: cannot run ${command}: ${result.error.message}`);
  if (result.status !== 0) {
    const output = `${result.stdout ?? ''}${result.stderr ?? ''}`.trim().split('\n').slice(-40).join('\n');
    throw new Error(`${what ?? command}: ${command} ${args.join(' ')} exited with ${result.status}\n${output}`);
  }
  return result.stdout;
}
