/**
 * How many units (leases, inspect steps) the next call of a script that
 * stops after a budget of server time may carry, on one server.
 *
 * Where the script's clock moves (`TIME` on Redis 7.0, `os.clock()` on Redis
 * 7.4 and later and on Valkey 8 and later: lua/includes/clock.lua), the
 * script stops itself at its budget, and the size follows how much the last
 * call did (halving at most after a call it stopped, so that one call cut
 * short by a stall does not shrink the calls after it). Where it stands
 * still (Redis 7.2, Valkey 7.2), nothing inside a call can stop it, so the
 * size alone must keep it within the budget: it is the budget over the cost
 * of a unit, measured from the start times of two calls the server ran one
 * after the other. The server runs one command at a time, so the gap
 * between them is at least the first call's cost (more when other commands
 * ran between them), and the least of the recent gaps per unit is the
 * estimate.
 */
export class CallSizer {
  #size: number;
  /** µs per unit of the recent calls whose clock stood still, newest last. */
  readonly #costs: number[] = [];
  /** The last call answered: when it started (server µs), its units, and whether its clock stood still. */
  #last: { startUs: number; units: number; stood: boolean } | undefined;

  constructor(
    /** Server time one call may take, in µs. */
    private readonly budgetUs: number,
    /** The first call's size, before anything is measured: small enough when the clock stands still. */
    first: number,
    /** No call carries more. */
    private readonly max: number,
  ) {
    this.#size = first;
  }

  /** The next call's size. */
  get size(): number {
    return this.#size;
  }

  /**
   * A call's reply: when it started, in server µs; how long it ran by its
   * clock (0: the clock stood still); the units it did, of the `sent` it
   * could; and whether its clock stopped it before it did them all. A call
   * that did all of the size now in force grows it.
   */
  answered(reply: { startUs: number; elapsedUs: number; units: number; sent: number; stopped: boolean }): void {
    const last = this.#last;
    if (last?.stood && reply.startUs > last.startUs && last.units > 0) {
      this.#costs.push((reply.startUs - last.startUs) / last.units);
      if (this.#costs.length > COSTS_KEPT) this.#costs.shift();
    }
    const stood = reply.elapsedUs <= 0;
    this.#last = { startUs: reply.startUs, units: reply.units, stood };
    let size = this.#size;
    // A call its clock stopped: the next carries what it reached, or half its size if more (one
    // call a stall cut short must not shrink every call after it; its clock stops the next too).
    if (reply.stopped) size = Math.max(1, reply.units, Math.ceil(size / 2));
    else if (reply.units === reply.sent && reply.sent >= size) size = Math.ceil(size * 1.25);
    if (stood && this.#costs.length > 0) size = Math.min(size, Math.floor(this.budgetUs / Math.min(...this.#costs)));
    this.#size = Math.max(1, Math.min(this.max, size));
  }
}

/** Recent gaps kept: the least of them is the estimate, so a few calls with other commands between them do not shrink the size. */
const COSTS_KEPT = 8;
