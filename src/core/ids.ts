import { createHash, randomBytes } from 'node:crypto';

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Random base62 string; rejection sampling keeps every character uniformly likely. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 248 = 62 * 4: bytes at or above it would bias the first characters.
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export const ID_PATTERN = /^[A-Za-z0-9]{24}$/;

/** Device, asset and token IDs: 24 random base62 characters (docs/api.md). */
export function newId(): string {
  return randomBase62(24);
}

export type TokenKind = 'device' | 'app' | 'gateway';
export const TOKEN_KINDS: readonly TokenKind[] = ['device', 'app', 'gateway'];

/** A token secret `<kind>:<40 base62>`; ~238 bits of entropy, shown once and never stored. */
export function newTokenSecret(kind: TokenKind): string {
  return `${kind}:${randomBase62(40)}`;
}

/** The token kind a secret claims by its prefix, or undefined for a malformed one. */
export function tokenKindOf(secret: string): TokenKind | undefined {
  const colon = secret.indexOf(':');
  if (colon <= 0) return undefined;
  const kind = secret.slice(0, colon);
  return (TOKEN_KINDS as readonly string[]).includes(kind) && secret.length - colon - 1 >= 32 ? (kind as TokenKind) : undefined;
}

/**
 * Only this hash is stored. Tokens carry enough entropy that a fast hash is safe here, and a slow
 * password hash would cost milliseconds on every MQTT CONNECT and uncached HTTP request on a Pi.
 */
export function hashToken(secret: string): string {
  return createHash('sha256').update(secret).digest('base64url');
}

/**
 * Asset names: 1–64 chars, none of `/ + # $`, whitespace or NUL (docs/api.md), and valid Unicode:
 * a lone UTF-16 surrogate (`"\ud800"` in JSON) has no UTF-8 form, so SQLite, MQTT topics and
 * UTF-8 replies would each turn it into something else.
 */
export function assetNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string') return 'must be a string';
  if (name.length < 1 || name.length > 64) return 'must be 1 to 64 characters long';
  // With the u flag a surrogate pair is one code point, so this class matches only lone surrogates.
  if (/[\ud800-\udfff]/u.test(name)) return 'must be valid Unicode (it contains a lone UTF-16 surrogate)';
  if (/[/+#$\s\0]/u.test(name)) return 'must not contain /, +, #, $, whitespace or NUL';
  return undefined;
}
