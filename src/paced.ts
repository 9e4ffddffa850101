import type { Cleanups } from './cleanups.js';
import { ClientClosedError } from './errors.js';

/**
 * Release calls in flight at once when many go out together (`close()`, a
 * group's release, the give-backs of leases a stall lost together). Sent
 * all at once, 100,000 releases queue ahead of every other client's
 * commands on the server (and of every other call on the connection); a
 * few at a time, the others' commands go in between, each waiting for at
 * most these few (a release runs for some 20-50 µs of server time).
 */
export const RELEASE_CALLS_IN_FLIGHT = 16;

/**
 * Runs `call` on each of `items` in order, at most `inFlight` at once: the
 * next goes out as one settles. Sends no more once `more()` says no. Settles
 * when every call sent has settled, with each item's outcome, as
 * `Promise.allSettled` does (undefined for an item not sent).
 */
export async function paced<T, R>(
  items: readonly T[],
  inFlight: number,
  call: (item: T) => Promise<R>,
  more: () => boolean = () => true,
): Promise<(PromiseSettledResult<R> | undefined)[]> {
  const outcomes = new Array<PromiseSettledResult<R> | undefined>(items.length).fill(undefined);
  let next = 0;
  const send = async (): Promise<void> => {
    while (next < items.length && more()) {
      const i = next++;
      try {
        outcomes[i] = { status: 'fulfilled', value: await call(items[i]!) };
      } catch (reason) {
        outcomes[i] = { status: 'rejected', reason };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, items.length) }, send));
  return outcomes;
}

/**
 * {@link paced} for calls that come one at a time: each goes out in the
 * order it came, at most `inFlight` at once; the first ones at once, in the
 * caller's tick, the rest as those settle. `cleanups` tracks each loop that
 * sends them (so that `close()` waits for it, bounded). An optional call
 * is dropped, not sent, once `close()` has settled (at its bound at the
 * latest); the others still go, however late. A call handles its own failure.
 */
export class PacedQueue {
  private readonly calls: { send: () => Promise<void>; drop: (() => void) | undefined }[] = [];
  private loops = 0;

  constructor(
    private readonly inFlight: number,
    private readonly cleanups: Cleanups,
  ) {
    cleanups.register(this);
  }

  push(call: () => Promise<void>, optional: boolean): void {
    this.enqueue(call, optional ? () => undefined : undefined);
  }

  private enqueue(call: () => Promise<void>, drop: (() => void) | undefined): void {
    if (drop !== undefined && !this.cleanups.sending) {
      drop();
      return;
    }
    this.calls.push({ send: call, drop });
    if (this.loops < this.inFlight) {
      this.loops++;
      this.cleanups.track(this.send());
    }
  }

  /**
   * Sends `call` as {@link push} does, and settles as it settles; an
   * `optional` call dropped unsent rejects with {@link ClientClosedError}.
   */
  run<R>(call: () => Promise<R>, what: string, optional: boolean): Promise<R> {
    return new Promise<R>((resolve, reject) =>
      this.enqueue(
        async () => {
          try {
            resolve(await call()); // a call that throws at once rejects too, and the queue goes on
          } catch (error) {
            reject(error);
          }
        },
        optional
          ? () => reject(new ClientClosedError(`${what} was not sent: the LockClient was closed first (it expires by itself)`))
          : undefined,
      ),
    );
  }

  /** Drops every optional call still queued (`close()` has settled). */
  dropOptional(): void {
    const kept = this.calls.filter((c) => c.drop === undefined);
    const dropped = this.calls.filter((c) => c.drop !== undefined);
    this.calls.splice(0, this.calls.length, ...kept);
    for (const call of dropped) call.drop!();
  }

  private async send(): Promise<void> {
    try {
      for (let next = this.calls.shift(); next !== undefined; next = this.calls.shift()) {
        if (next.drop !== undefined && !this.cleanups.sending) next.drop();
        else await next.send();
      }
    } finally {
      this.loops--;
    }
  }
}
