import type { ServerResponse } from 'node:http';

/** Resolves true once `res` can take more, false if the connection closed first. */
function drained(res: ServerResponse): Promise<boolean> {
  if (res.destroyed || res.writableEnded) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (more: boolean) => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(more);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    res.on('drain', onDrain);
    res.on('close', onClose);
  });
}

/**
 * Answers 200 with JSON written as it is produced: `head`, the items as a comma-separated list,
 * `tail` (`[` … `]`, or an object whose last member is that list). Each item is serialised when
 * it is reached and the next one waits while the client is not reading, so the gateway holds about
 * one item at a time, not the whole answer: a device's asset list is up to 1 024 latest values of
 * up to 64 KiB each (docs/api.md, "Pages"). The same bytes as one JSON.stringify of the whole,
 * sent chunked. After the headers an error can no longer become an error answer: the connection
 * is closed instead (the client sees a truncated body, never a wrong one).
 */
export async function streamJson(res: ServerResponse, head: string, items: Iterable<unknown> | AsyncIterable<unknown>, tail: string): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
  try {
    let separator = '';
    if (!res.write(head) && !(await drained(res))) return;
    // Async items: read as they are reached (an asset list's latest states from PostgreSQL).
    for await (const item of items) {
      const more = res.write(separator + JSON.stringify(item));
      separator = ',';
      if (!more && !(await drained(res))) return;
    }
    res.end(tail);
  } catch {
    res.destroy();
  }
}
