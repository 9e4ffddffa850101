/**
 * Bounds on how long the library waits for Redis: a call still unanswered at
 * its deadline is rejected (the command itself goes on; see lock.ts for how
 * a late grant is given back). One timer serves every pending call, set for
 * the earliest deadline: a timer per call would cost a setTimeout and a
 * clearTimeout on every acquire and release, and deadlines arrive in
 * increasing order, so the timer rarely moves.
 */
import { RedisUnavailableError, type RWLockErrorContext } from './errors.js';

interface Pending {
  readonly at: number;
  readonly fail: () => void;
}

export class Deadlines {
  private readonly pending = new Set<Pending>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;

  /**
   * `promise`'s outcome, or a rejection with `late()` once `at`
   * (performance.now) passes first, or with `aborted()` as soon as `signal`
   * aborts.
   */
  race<T>(promise: Promise<T>, at: number, late: () => Error, signal?: AbortSignal, aborted?: () => Error): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let onAbort: (() => void) | undefined;
      const entry: Pending = { at, fail: () => settle(() => reject(late())) };
      const settle = (then: () => void) => {
        if (!this.pending.delete(entry)) return;
        if (onAbort) signal!.removeEventListener('abort', onAbort);
        then();
      };
      this.pending.add(entry);
      if (signal && aborted) {
        if (signal.aborted) {
          settle(() => reject(aborted()));
          return;
        }
        onAbort = () => settle(() => reject(aborted()));
        signal.addEventListener('abort', onAbort, { once: true });
      }
      promise.then(
        (value) => settle(() => resolve(value)),
        (error: unknown) => settle(() => reject(error)),
      );
      if (at < this.timerAt) this.arm(at);
    });
  }

  /**
   * `promise`'s outcome, or a {@link RedisUnavailableError} saying that
   * Redis did not answer `what` within `timeoutMs` (`redisTimeoutMs`).
   */
  within<T>(promise: Promise<T>, timeoutMs: number, what: string, context: RWLockErrorContext): Promise<T> {
    return this.race(
      promise,
      performance.now() + timeoutMs,
      () =>
        new RedisUnavailableError(
          `${what} failed: Redis did not answer within ${timeoutMs} ms (redisTimeoutMs); the outcome is unknown; the operation may be retried`,
          context,
        ),
    );
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.expire(), Math.max(0, at - performance.now()));
    this.timer.unref();
  }

  private expire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const entry of [...this.pending]) {
      // A timer may fire up to its 1 ms resolution early: count that as due.
      if (entry.at <= now + 1) entry.fail();
      else if (entry.at < next) next = entry.at;
    }
    if (next < Infinity) this.arm(next);
  }
}
