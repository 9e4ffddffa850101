/**
 * Bounds on how long the library waits for Redis: a call still unanswered at
 * its deadline is rejected (the command itself goes on; see lock.ts for how
 * a late grant is given back). One timer serves every pending call, set for
 * the earliest deadline: a timer per call would cost a setTimeout and a
 * clearTimeout on every acquire and release, and deadlines arrive in
 * increasing order, so the timer rarely moves. (This runs twice per lock
 * cycle: one small object and one promise per call, no closures beyond the
 * promise's executor and handlers.)
 */
import { type LockMode, RedisUnavailableError } from './errors.js';

/** What a bounded call is about, for its error: a lease, a lock's resource, or nothing more. */
export interface CallSubject {
  readonly resource?: string;
  readonly mode?: LockMode;
  readonly token?: string;
}

/** The errors a bound rejects with: methods, so that a bounded call makes no closures for them. */
export interface BoundErrors {
  /** The bound passed first. */
  late(): Error;
  /** The signal aborted first. */
  aborted?(): Error;
  /** The LockClient was closed first (see {@link Deadlines.close}); calls without it wait on. */
  closed?(): Error;
}

/** One bounded call: settles its promise once, with the call's outcome or the error of its bound. */
class Pending<T> {
  resolve!: (value: T) => void;
  reject!: (reason: unknown) => void;
  settled = false;
  abortListener: (() => void) | undefined;
  /** Neighbours in the list of pending calls. */
  prev: Pending<unknown> | undefined;
  next: Pending<unknown> | undefined;

  constructor(
    readonly at: number,
    readonly errors: BoundErrors,
    readonly signal: AbortSignal | undefined,
  ) {}
}

/**
 * The error of a call Redis did not answer in time. Made on every release, so
 * it keeps its parts and builds the message only when the bound passes.
 */
class Unanswered implements BoundErrors {
  constructor(
    private readonly deadlines: Deadlines,
    private readonly operation: string,
    private readonly subject: CallSubject,
    private readonly timeoutMs: number,
  ) {}

  late(): Error {
    const { resource, mode, token } = this.subject;
    const what = resource === undefined ? this.operation : `${this.operation} the ${mode ? `${mode} ` : ''}lock on "${resource}"`;
    return new RedisUnavailableError(
      `${what} failed: Redis did not answer within ${this.timeoutMs} ms (redisTimeoutMs)${this.deadlines.trouble()}; ` +
        'the outcome is unknown; the operation may be retried',
      { resource, mode, owner: token },
    );
  }
}

export class Deadlines {
  /**
   * @param connectionTrouble Why the Redis client has no connection now
   *   (the driver's `connectionTrouble`), read when a call goes unanswered.
   */
  constructor(private readonly connectionTrouble: () => string | undefined = () => undefined) {}

  /** ": <why the client is not connected>" for a timeout's message, or '' when it is connected or cannot tell. */
  trouble(): string {
    const why = this.connectionTrouble();
    return why === undefined ? '' : `: ${why}`;
  }

  /**
   * The pending calls, a doubly linked list through the entries: adding and
   * removing cost two pointer writes (a Set of objects costs about 1 µs per
   * add and delete under this churn, measured at 64 calls in flight).
   */
  private head: Pending<unknown> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private closing = false;

  /**
   * `promise`'s outcome, or a rejection with `errors.late()` once `at`
   * (performance.now) passes first, or with `errors.aborted()` as soon as
   * `signal` aborts.
   */
  race<T>(promise: Promise<T>, at: number, errors: BoundErrors, signal?: AbortSignal): Promise<T> {
    const entry = new Pending<T>(at, errors, signal);
    const result = new Promise<T>((resolve, reject) => {
      entry.resolve = resolve;
      entry.reject = reject;
    });
    // Settled before it is linked: it must not be unlinked (that would drop the whole list).
    if (this.closing && errors.closed !== undefined) {
      entry.settled = true;
      entry.reject(errors.closed());
      return result;
    }
    if (signal !== undefined && errors.aborted !== undefined) {
      if (signal.aborted) {
        entry.settled = true;
        entry.reject(errors.aborted());
        return result;
      }
      entry.abortListener = () => this.fail(entry, errors.aborted!());
      signal.addEventListener('abort', entry.abortListener, { once: true });
    }
    this.link(entry as Pending<unknown>);
    promise.then(
      (value) => {
        if (this.finish(entry)) entry.resolve(value);
      },
      (error: unknown) => this.fail(entry, error),
    );
    if (at < this.timerAt) this.arm(at);
    return result;
  }

  /**
   * `promise`'s outcome, or a {@link RedisUnavailableError} saying that
   * Redis did not answer `operation` (e.g. `releasing`) on `subject` within
   * `timeoutMs` (`redisTimeoutMs`).
   */
  within<T>(promise: Promise<T>, timeoutMs: number, operation: string, subject: CallSubject): Promise<T> {
    return this.race(promise, performance.now() + timeoutMs, new Unanswered(this, operation, subject, timeoutMs));
  }

  /**
   * Ends every pending call whose errors say what closing means (the
   * acquires: `close()` does not wait out their bounds), and every such call
   * made from now on, with its `closed()` error. Releases and renewals wait on.
   */
  close(): void {
    this.closing = true;
    const due: Pending<unknown>[] = [];
    for (let entry = this.head; entry !== undefined; entry = entry.next) if (entry.errors.closed) due.push(entry);
    for (const entry of due) this.fail(entry, entry.errors.closed!());
  }

  /** Marks `entry` settled; false if it already was. */
  private finish(entry: Pending<unknown> | Pending<never>): boolean {
    if (entry.settled) return false;
    entry.settled = true;
    this.unlink(entry as Pending<unknown>);
    if (entry.abortListener) entry.signal!.removeEventListener('abort', entry.abortListener);
    return true;
  }

  private fail<T>(entry: Pending<T>, error: unknown): void {
    if (this.finish(entry as Pending<unknown>)) entry.reject(error);
  }

  private link(entry: Pending<unknown>): void {
    entry.next = this.head;
    if (this.head) this.head.prev = entry;
    this.head = entry;
  }

  private unlink(entry: Pending<unknown>): void {
    if (entry.prev) entry.prev.next = entry.next;
    else this.head = entry.next;
    if (entry.next) entry.next.prev = entry.prev;
    entry.prev = entry.next = undefined;
    // Once closed and idle, leave no timer behind (while open, the timer is kept to spare a re-arm per call).
    if (this.closing && this.head === undefined && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Infinity;
    }
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
    const due: Pending<unknown>[] = [];
    for (let entry = this.head; entry !== undefined; entry = entry.next) {
      // A timer may fire up to its 1 ms resolution early: count that as due.
      if (entry.at <= now + 1) due.push(entry);
      else if (entry.at < next) next = entry.at;
    }
    if (next < Infinity) this.arm(next);
    // After an event-loop stall, timers run before the I/O that came in meanwhile: let a reply
    // that arrived in time settle its call first (setImmediate runs after the poll phase; not
    // unref'd, or the poll phase could block until some other event).
    if (due.length > 0) setImmediate(() => this.failLate(due));
  }

  private failLate(due: readonly Pending<unknown>[]): void {
    for (const entry of due) if (!entry.settled) this.fail(entry, entry.errors.late());
  }
}
