// The console talks to the gateway through its public HTTP API only, with the signed-in token.

const TOKEN_KEY = 'outpost.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The token lives in sessionStorage: gone when the tab closes, never sent anywhere but this gateway. */
export const session = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  set token(value) {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  },
};

let onUnauthorized = () => {};
/** Called when the gateway stops accepting the token (revoked while the console was open). */
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

export async function api(method, path, body, token = session.token) {
  const headers = { authorization: `Bearer ${token}` };
  let payload;
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const res = await fetch(path, { method, headers, body: payload });
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data?.code ?? 'HTTP_' + res.status, data?.error ?? `HTTP ${res.status}`);
    err.body = data;
    if (res.status === 401 && token === session.token) onUnauthorized(err);
    throw err;
  }
  return data;
}

export const get = (path) => api('GET', path);

/**
 * Reads `GET /events` (server-sent events) with fetch, because EventSource cannot send an
 * Authorization header and the token must not travel in a URL. Reconnects with backoff until stopped.
 */
export function openEventStream(query, onEvent, onStatus = () => {}) {
  let stopped = false;
  let controller;
  let delay = 1000;
  const run = async () => {
    while (!stopped) {
      controller = new AbortController();
      try {
        const res = await fetch(`/events${query}`, { headers: { authorization: `Bearer ${session.token}` }, signal: controller.signal });
        if (res.status === 401) {
          onUnauthorized(new ApiError(401, 'UNAUTHORIZED', 'token no longer valid'));
          return;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        onStatus('connected');
        delay = 1000;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let type = 'message';
            let data = '';
            for (const line of block.split('\n')) {
              if (line.startsWith('event:')) type = line.slice(6).trim();
              else if (line.startsWith('data:')) data += line.slice(5).trim();
            }
            if (type === 'revoked') {
              onUnauthorized(new ApiError(401, 'UNAUTHORIZED', 'token revoked'));
              return;
            }
            if (data && type === 'message') onEvent(JSON.parse(data));
            if (type === 'dropped') onStatus('dropped', JSON.parse(data).count);
          }
        }
      } catch (err) {
        if (stopped) return;
        onStatus('disconnected', String(err?.message ?? err));
      }
      if (stopped) return;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 30000);
    }
  };
  run();
  return () => {
    stopped = true;
    controller?.abort();
  };
}
