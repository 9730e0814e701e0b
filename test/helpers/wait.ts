/**
 * Waiting for something another process does (a daemon, a broker, a gateway's sync) without a fixed
 * sleep: poll `check` until it holds, and fail naming what never happened. The timeout is generous
 * because these tests share two cores with each other; it only matters when something is wrong.
 */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000, pollMs = 100): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(pollMs);
  }
}
