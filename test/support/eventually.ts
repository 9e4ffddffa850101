import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls `check` every `everyMs` until it returns true, or fails after `ms` naming `what`.
 * Tests wait for a state (a waiter queued, a node emptied) with this rather than a fixed
 * sleep, which a loaded CI machine can outrun. The default bound is long (10 s): a state that
 * comes returns at once, and one that a loaded machine makes late still comes within it.
 */
export async function eventually(what: string, check: () => boolean | Promise<boolean>, ms = 10_000, everyMs = 10): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
