/**
 * `redis-rwlock/opentelemetry`: the library's metrics as OpenTelemetry
 * instruments, on the meter you give or the global `MeterProvider`'s.
 * Needs `@opentelemetry/api` (an optional peer dependency) and an
 * OpenTelemetry SDK, or an exporter such as `@opentelemetry/exporter-prometheus`, that reads them.
 *
 * Acquisitions, their durations and renewal rounds come from the library's
 * tracing channels, so they count every `LockClient` of the process; the
 * leases held and the losses come from each client given to
 * {@link LockMetrics.observe}. The resource name is left out of the
 * attributes unless `resourceAttribute` is set: one series per lock can
 * outgrow a metrics backend.
 *
 * @example
 * ```ts
 * import { LockClient } from 'redis-rwlock';
 * import { LockMetrics } from 'redis-rwlock/opentelemetry';
 *
 * const locks = new LockClient(redis);
 * const lockMetrics = new LockMetrics().observe(locks); // the global MeterProvider's meter
 * // ...
 * lockMetrics.disable();
 * ```
 *
 * @module redis-rwlock/opentelemetry
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import {
  type Attributes,
  type Counter,
  type Histogram,
  type Meter,
  metrics,
  type ObservableResult,
  type ObservableUpDownCounter,
} from '@opentelemetry/api';
import type { LockClient } from '../client.js';
import { InvalidArgumentError, type LockLostError } from '../errors.js';
import type { Lease } from '../lease.js';
import { PACKAGE_VERSION } from '../lua/scripts.generated.js';
import { type AcquireTraceContext, type RenewTraceContext, TRACING_CHANNELS } from '../observability/channels.js';
import { WAIT_BUCKETS_MS } from '../observability/telemetry.js';

/** The instruments' names, as a metrics backend shows them (Prometheus: dots become underscores). */
export const LOCK_METRICS = Object.freeze({
  /** Counter: acquisitions by `rwlock.mode` and `rwlock.outcome` (`granted`, `timeout`, `busy`, `aborted`, `conflict`, `failed`). */
  acquisitions: 'rwlock.acquisitions',
  /** Histogram, in seconds: from an acquire call to its grant or failure, by `rwlock.mode` and `rwlock.outcome`. */
  acquireDuration: 'rwlock.acquire.duration',
  /** Up-down counter: the leases the observed clients hold now. */
  leasesHeld: 'rwlock.leases.held',
  /** Counter: leases lost while held (expired or taken over), by `rwlock.mode`. */
  losses: 'rwlock.lease.losses',
  /** Counter: automatic renewal rounds, by `rwlock.outcome` (`ok`, or `failed` when Redis could not be asked). */
  renewalRounds: 'rwlock.renewal.rounds',
  /** Counter: the holdings renewal rounds took up, by `rwlock.outcome` (`renewed`, `lost`, `unreached`). */
  renewalHoldings: 'rwlock.renewal.holdings',
} as const);

/** Options of {@link LockMetrics}. */
export interface LockMetricsOptions {
  /** The meter to create the instruments on; by default the global `MeterProvider`'s meter `redis-rwlock`. */
  readonly meter?: Meter;
  /**
   * Adds the resource name (`rwlock.resource`) to the attributes of
   * acquisitions, their durations and losses. Off by default: every lock
   * then makes series of its own, which a service with many locks should
   * not send to its metrics backend.
   */
  readonly resourceAttribute?: boolean;
}

/** An observed client, held weakly, and its `lost` listener. */
interface Observed {
  readonly client: WeakRef<LockClient>;
  readonly lost: (error: LockLostError, leases: readonly Lease[]) => void;
}

const ACQUIRED = `tracing:${TRACING_CHANNELS.acquire}:asyncEnd`;
const RENEWED = `tracing:${TRACING_CHANNELS.renew}:asyncEnd`;
const BUCKETS_S = WAIT_BUCKETS_MS.map((ms) => ms / 1000);

/**
 * The library's metrics on an OpenTelemetry meter, from the moment it is
 * made until {@link LockMetrics.disable}. Make one per process (two would
 * count each acquisition twice).
 */
export class LockMetrics {
  readonly #acquisitions: Counter;
  readonly #duration: Histogram;
  readonly #losses: Counter;
  readonly #rounds: Counter;
  readonly #holdings: Counter;
  readonly #resource: boolean;
  /**
   * The observed clients, each held weakly: a client the application let go
   * of is collected without {@link LockMetrics.forget} (its entry then goes
   * too), and a closed one is let go of at the next collection of the
   * instruments, which no longer ask it.
   */
  readonly #clients = new Set<Observed>();
  readonly #byClient = new WeakMap<LockClient, Observed>();
  readonly #collected = new FinalizationRegistry<Observed>((entry) => this.#clients.delete(entry));
  readonly #observeHeld = (result: ObservableResult) => {
    let held = 0;
    for (const entry of [...this.#clients]) {
      const locks = entry.client.deref();
      if (locks === undefined) this.#clients.delete(entry);
      else if (locks.closed) this.forget(locks);
      else held += locks.stats().heldLeases;
    }
    result.observe(held);
  };
  readonly #held: ObservableUpDownCounter;
  #enabled = true;

  constructor(options: LockMetricsOptions = {}) {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidArgumentError('options', 'must be an object such as { meter, resourceAttribute }');
    }
    const { meter = metrics.getMeter('redis-rwlock', PACKAGE_VERSION), resourceAttribute = false } = options;
    if (typeof (meter as Partial<Meter> | null)?.createCounter !== 'function') {
      throw new InvalidArgumentError('meter', "must be an OpenTelemetry Meter, such as metrics.getMeter('redis-rwlock')");
    }
    if (typeof resourceAttribute !== 'boolean') {
      throw new InvalidArgumentError('resourceAttribute', `must be true or false, got ${typeof resourceAttribute}`);
    }
    this.#resource = resourceAttribute;
    this.#acquisitions = meter.createCounter(LOCK_METRICS.acquisitions, {
      unit: '{acquisition}',
      description: 'Lock acquisitions, by mode and outcome',
    });
    this.#duration = meter.createHistogram(LOCK_METRICS.acquireDuration, {
      unit: 's',
      description: 'Time from an acquire call to its grant or failure',
      advice: { explicitBucketBoundaries: BUCKETS_S },
    });
    this.#held = meter.createObservableUpDownCounter(LOCK_METRICS.leasesHeld, {
      unit: '{lease}',
      description: 'Leases held now by the observed LockClients',
    });
    this.#held.addCallback(this.#observeHeld);
    this.#losses = meter.createCounter(LOCK_METRICS.losses, { unit: '{lease}', description: 'Leases lost while held, by mode' });
    this.#rounds = meter.createCounter(LOCK_METRICS.renewalRounds, {
      unit: '{round}',
      description: 'Automatic renewal rounds, by outcome',
    });
    this.#holdings = meter.createCounter(LOCK_METRICS.renewalHoldings, {
      unit: '{holding}',
      description: 'Holdings taken up by renewal rounds, by outcome',
    });
    subscribe(ACQUIRED, this.#acquired);
    subscribe(RENEWED, this.#renewed);
  }

  /**
   * Counts `locks`' leases held and its losses from now on, until
   * {@link LockMetrics.forget}, {@link LockMetrics.disable} or `locks.close()`.
   * Holds `locks` weakly: observing a client does not keep it alive. Returns
   * this object.
   */
  observe(locks: LockClient): this {
    if (typeof (locks as Partial<LockClient> | null)?.stats !== 'function') {
      throw new InvalidArgumentError('locks', 'must be a LockClient');
    }
    if (!this.#enabled) throw new InvalidArgumentError('locks', 'cannot be observed by a LockMetrics that was disabled; make a new one');
    if (this.#byClient.has(locks) || locks.closed) return this;
    // Refers to this object alone, not to the client: the client's listener keeps no path back to it.
    const lost = (_error: LockLostError, leases: readonly Lease[]) => {
      for (const lease of leases) this.#losses.add(1, this.#attributes(lease.mode, lease.resource));
    };
    const entry: Observed = { client: new WeakRef(locks), lost };
    this.#clients.add(entry);
    this.#byClient.set(locks, entry);
    this.#collected.register(locks, entry, entry);
    locks.on('lost', lost);
    return this;
  }

  /**
   * Stops counting `locks` (its leases leave the held count). Not needed for
   * a client that was closed or that the application let go of: those are
   * let go of here too.
   */
  forget(locks: LockClient): void {
    const entry = this.#byClient.get(locks);
    if (!entry) return;
    locks.off('lost', entry.lost);
    this.#clients.delete(entry);
    this.#byClient.delete(locks);
    this.#collected.unregister(entry);
  }

  /** Unsubscribes from the channels and forgets every client; the instruments report nothing more. */
  disable(): void {
    if (!this.#enabled) return;
    this.#enabled = false;
    unsubscribe(ACQUIRED, this.#acquired);
    unsubscribe(RENEWED, this.#renewed);
    for (const entry of [...this.#clients]) {
      const locks = entry.client.deref();
      if (locks) this.forget(locks);
    }
    this.#clients.clear();
    this.#held.removeCallback(this.#observeHeld);
  }

  #attributes(mode: string, resource: string, outcome?: string): Attributes {
    const attributes: Attributes = { 'rwlock.mode': mode };
    if (outcome !== undefined) attributes['rwlock.outcome'] = outcome;
    if (this.#resource) attributes['rwlock.resource'] = resource;
    return attributes;
  }

  readonly #acquired = (message: unknown) => {
    const trace = message as AcquireTraceContext;
    const attributes = this.#attributes(trace.mode, trace.resource, trace.outcome ?? 'failed');
    this.#acquisitions.add(1, attributes);
    this.#duration.record(trace.waitedMs / 1000, attributes);
  };

  readonly #renewed = (message: unknown) => {
    const trace = message as RenewTraceContext;
    if (trace.holdings === 0) return; // a timer's round with nothing to renew
    this.#rounds.add(1, { 'rwlock.outcome': trace.error === undefined ? 'ok' : 'failed' });
    for (const outcome of ['renewed', 'lost', 'unreached'] as const) {
      if (trace[outcome] > 0) this.#holdings.add(trace[outcome], { 'rwlock.outcome': outcome });
    }
  };
}
