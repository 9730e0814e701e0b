import { readFileSync, statSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { ConfigError } from '../core/config.js';

/** The config keys behind one listener, to name in a message when it cannot be opened. */
export interface ListenerKeys {
  host: string;
  port: string;
}

/**
 * Turns a failed listen() into the message an admin needs: which key, what is wrong with it.
 * Undefined when the failure is not about the address (then it is a bug, not a setting).
 */
export function bindError(err: unknown, keys: ListenerKeys, host: string, port: number): ConfigError | undefined {
  const e = err as NodeJS.ErrnoException & { hostname?: string };
  switch (e.code) {
    case 'EADDRINUSE':
      return new ConfigError(`config key ${keys.port}: port ${port} on ${host} is already in use (EADDRINUSE)`);
    case 'EACCES':
      return new ConfigError(`config key ${keys.port}: no permission to listen on port ${port} (EACCES; ports below 1024 need CAP_NET_BIND_SERVICE)`);
    case 'EADDRNOTAVAIL':
      return new ConfigError(`config key ${keys.host}: ${host} is not an address of this machine (EADDRNOTAVAIL)`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_FAIL':
    case 'EAI_NONAME':
      return new ConfigError(`config key ${keys.host}: ${JSON.stringify(host)} is not an IP address and does not resolve (${e.code})`);
    default:
      if (e.syscall === 'getaddrinfo' || e.code === 'EINVAL' || e.code === 'EAFNOSUPPORT') {
        return new ConfigError(`config key ${keys.host}: cannot listen on ${JSON.stringify(host)} (${e.code ?? e.message})`);
      }
      return undefined;
  }
}

/** Certificates and keys are a few kB; a larger file is a wrong path (or /dev/zero), not a certificate. */
const MAX_PEM_BYTES = 1024 * 1024;

export function readPem(key: string, path: string): Buffer {
  let size: number;
  try {
    const stat = statSync(path);
    if (!stat.isFile()) throw new ConfigError(`config key ${key}: ${path} is not a regular file`);
    size = stat.size;
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`config key ${key}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  if (size > MAX_PEM_BYTES) throw new ConfigError(`config key ${key}: ${path} is ${size} bytes, too large for a PEM file`);
  try {
    return readFileSync(path);
  } catch (err) {
    throw new ConfigError(`config key ${key}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

/**
 * Reads the MQTT TLS certificate and key and checks that they load as a pair, before any port is
 * opened, so a wrong path or a mismatched key stops the start with the key's name.
 */
export function loadTlsFiles(tls: { cert: string | null; key: string | null }): { cert: Buffer; key: Buffer } {
  if (!tls.cert) throw new ConfigError('config key mqtt.tls.cert: required when mqtt.tls.enabled is true');
  if (!tls.key) throw new ConfigError('config key mqtt.tls.key: required when mqtt.tls.enabled is true');
  const cert = readPem('mqtt.tls.cert', tls.cert);
  const key = readPem('mqtt.tls.key', tls.key);
  try {
    createSecureContext({ cert });
  } catch (err) {
    throw new ConfigError(`config key mqtt.tls.cert: ${tls.cert} is not a usable PEM certificate (${(err as Error).message})`);
  }
  try {
    createSecureContext({ key });
  } catch (err) {
    throw new ConfigError(`config key mqtt.tls.key: ${tls.key} is not a usable PEM private key (${(err as Error).message})`);
  }
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new ConfigError(`config key mqtt.tls.key: ${tls.key} does not belong to the certificate in mqtt.tls.cert (${(err as Error).message})`);
  }
  return { cert, key };
}
