import type { IncomingMessage } from 'node:http';
import { ServiceError } from '../../core/errors.js';
import { decodeCborBody } from '../../codec/cbor.js';
import { DEFAULT_JSON_DEPTH, parseJson } from '../../core/json.js';

export type MediaKind = 'json' | 'cbor' | 'binary';

/** The media kind of a request body, or 415 naming what is accepted. */
export function mediaKind(header: string | undefined, accepted: readonly MediaKind[]): MediaKind {
  // No Content-Type with a body: curl and small firmware often omit it; JSON is the service's default.
  const type = (header ?? 'application/json').split(';')[0]!.trim().toLowerCase();
  let kind: MediaKind | undefined;
  if (type === 'application/json' || type.endsWith('+json') || type === 'text/json') kind = 'json';
  else if (type === 'application/cbor') kind = 'cbor';
  else if (type === 'application/octet-stream') kind = 'binary';
  if (!kind || !accepted.includes(kind)) {
    const names = accepted.map((k) => ({ json: 'application/json', cbor: 'application/cbor', binary: 'application/octet-stream' })[k]);
    throw new ServiceError('UNSUPPORTED_MEDIA_TYPE', `Content-Type ${JSON.stringify(type)} is not supported here; use ${names.join(' or ')}`);
  }
  return kind;
}

/** Reads the body up to `limit` bytes; 413 as soon as it is known to be larger. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    return Promise.reject(new ServiceError('PAYLOAD_TOO_LARGE', `body of ${declared} bytes is over the limit of ${limit} bytes`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limit) {
        failed = true;
        chunks.length = 0;
        reject(new ServiceError('PAYLOAD_TOO_LARGE', `body is over the limit of ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!failed) resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
    req.on('error', (err) => {
      if (!failed) reject(err);
    });
  });
}

/** A JSON or CBOR body as data; `undefined` when the request has no body. */
export function decodeBody(bytes: Buffer, kind: MediaKind, jsonDepth = DEFAULT_JSON_DEPTH): unknown {
  if (bytes.length === 0) return undefined;
  if (kind === 'cbor') return decodeCborBody(bytes, 'body');
  return parseJson(bytes.toString('utf8'), 'body', jsonDepth);
}
