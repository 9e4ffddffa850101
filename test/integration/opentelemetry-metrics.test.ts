/**
 * redis-rwlock/opentelemetry against real Redis, read with the SDK's
 * in-memory exporter: acquisitions by mode and outcome, their durations,
 * the leases held, losses and renewal rounds, with the resource name only
 * when asked for.
 */
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { Attributes } from '@opentelemetry/api';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { expect } from 'chai';
import sinon from 'sinon';
import { InvalidArgumentError, type Lease, LockClient, WAIT_BUCKETS_MS } from '../../src/index.js';
import { LOCK_METRICS, LockMetrics } from '../../src/opentelemetry/index.js';
import { forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';

interface Point {
  readonly attributes: Attributes;
  /** A sum's value, or a histogram's count. */
  readonly value: number;
  readonly sum?: number;
  readonly boundaries?: readonly number[];
}

/** A meter provider whose metrics a test reads when it asks (the reader's own interval never comes). */
class Metrics {
  readonly exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  readonly reader = new PeriodicExportingMetricReader({ exporter: this.exporter, exportIntervalMillis: 3_600_000 });
  readonly provider = new MeterProvider({ readers: [this.reader] });

  /** Every point of the metric `name` in the latest collection. */
  async points(name: string): Promise<Point[]> {
    this.exporter.reset();
    await this.reader.forceFlush();
    const metric = this.exporter
      .getMetrics()
      .at(-1)
      ?.scopeMetrics.flatMap((scope) => scope.metrics)
      .find((m) => m.descriptor.name === name);
    if (!metric) return [];
    return metric.dataPoints.map((point) => {
      if (metric.dataPointType === DataPointType.HISTOGRAM) {
        const histogram = point.value as { count: number; sum?: number; buckets: { boundaries: number[] } };
        return { attributes: point.attributes, value: histogram.count, sum: histogram.sum, boundaries: histogram.buckets.boundaries };
      }
      return { attributes: point.attributes, value: point.value as number };
    });
  }

  /** The value of the point with exactly `attributes`, 0 when there is none. */
  async value(name: string, attributes: Attributes): Promise<number> {
    const key = JSON.stringify(Object.entries(attributes).sort());
    return (await this.points(name)).find((p) => JSON.stringify(Object.entries(p.attributes).sort()) === key)?.value ?? 0;
  }
}

forEachTopology('OpenTelemetry metrics (redis-rwlock/opentelemetry)', (ctx) => {
  let metrics: Metrics;
  let lockMetrics: LockMetrics | undefined;
  let locks: LockClient | undefined;
  beforeEach(() => {
    metrics = new Metrics();
  });
  afterEach(async () => {
    lockMetrics?.disable();
    lockMetrics = undefined;
    await locks?.close();
    locks = undefined;
    await metrics.provider.shutdown();
  });

  it('counts acquisitions by mode and outcome, with their durations, and the leases held; no resource name by default', async () => {
    locks = new LockClient(await ctx.lockRedis(), { recheckMs: 100 });
    lockMetrics = new LockMetrics({ meter: metrics.provider.getMeter('test') }).observe(locks);
    const writer = await locks.lock('metrics:{a}').acquireWrite();
    expect(await locks.lock('metrics:{a}').tryAcquireRead({ owner: 'other' })).to.equal(null);
    await locks
      .lock('metrics:{a}')
      .acquireRead({ waitMs: 50, owner: 'other' })
      .catch(() => undefined);
    const reader = await locks.lock('metrics:{b}').acquireRead();
    expect(await metrics.value(LOCK_METRICS.leasesHeld, {})).to.equal(2);
    const contended = once(locks, 'contended');
    const waiting = locks.lock('metrics:{a}').acquireWrite({ waitMs: 10_000, owner: 'next' });
    await contended;
    await writer.release();
    const handed = await waiting;
    await handed.release();
    await reader.release();

    const acquisitions = LOCK_METRICS.acquisitions;
    expect(await metrics.value(acquisitions, { 'rwlock.mode': 'write', 'rwlock.outcome': 'granted' })).to.equal(2);
    expect(await metrics.value(acquisitions, { 'rwlock.mode': 'read', 'rwlock.outcome': 'granted' })).to.equal(1);
    expect(await metrics.value(acquisitions, { 'rwlock.mode': 'read', 'rwlock.outcome': 'busy' })).to.equal(1);
    expect(await metrics.value(acquisitions, { 'rwlock.mode': 'read', 'rwlock.outcome': 'timeout' })).to.equal(1);
    const durations = await metrics.points(LOCK_METRICS.acquireDuration);
    expect(durations.reduce((n, p) => n + p.value, 0)).to.equal(5);
    const timedOut = durations.find((p) => p.attributes['rwlock.outcome'] === 'timeout');
    expect(timedOut?.sum, 'about its 50 ms waitMs (a timer may fire a little early)').to.be.at.least(0.045);
    expect(timedOut?.boundaries).to.deep.equal(WAIT_BUCKETS_MS.map((ms) => ms / 1000));
    for (const name of [acquisitions, LOCK_METRICS.acquireDuration]) {
      for (const point of await metrics.points(name)) expect(point.attributes).to.not.have.property('rwlock.resource');
    }
    expect(await metrics.value(LOCK_METRICS.leasesHeld, {})).to.equal(0);
  });

  it('counts a lost lease by mode, and the renewal rounds that renewed and lost holdings', async () => {
    locks = new LockClient(await ctx.lockRedis(), { leaseMs: 2_000 }); // renews every 667 ms; a late round still finds both held
    lockMetrics = new LockMetrics({ meter: metrics.provider.getMeter('test'), resourceAttribute: true }).observe(locks);
    const kept = await locks.lock('metrics:{kept}').acquireRead();
    const doomed: Lease = await locks.lock('metrics:{lost}').acquireWrite();
    const renewed = async () => metrics.value(LOCK_METRICS.renewalHoldings, { 'rwlock.outcome': 'renewed' });
    await eventually('a renewal round that renewed both holdings', async () => (await renewed()) >= 2, 10_000, 50);
    const lost = once(locks, 'lost');
    await locks.forceRelease('metrics:{lost}');
    await lost;
    expect(doomed.held).to.equal(false);
    expect(
      await metrics.value(LOCK_METRICS.losses, { 'rwlock.mode': 'write', 'rwlock.resource': 'metrics:{lost}' }),
      'the loss, by mode and resource',
    ).to.equal(1);
    expect(await metrics.value(LOCK_METRICS.renewalRounds, { 'rwlock.outcome': 'ok' })).to.be.at.least(1);
    expect(await metrics.value(LOCK_METRICS.renewalHoldings, { 'rwlock.outcome': 'lost' }), 'found lost by a renewal round').to.equal(1);
    expect(
      await metrics.value(LOCK_METRICS.acquisitions, {
        'rwlock.mode': 'read',
        'rwlock.outcome': 'granted',
        'rwlock.resource': 'metrics:{kept}',
      }),
    ).to.equal(1);
    expect(await metrics.value(LOCK_METRICS.leasesHeld, {})).to.equal(1);
    await kept.release();
  });

  it('counts nothing more once disabled, and refuses bad options with a typed error', async () => {
    locks = new LockClient(await ctx.lockRedis());
    lockMetrics = new LockMetrics({ meter: metrics.provider.getMeter('test') }).observe(locks);
    await (await locks.lock('metrics:{c}').acquireWrite()).release();
    lockMetrics.disable();
    await (await locks.lock('metrics:{c}').acquireWrite()).release();
    expect(await metrics.value(LOCK_METRICS.acquisitions, { 'rwlock.mode': 'write', 'rwlock.outcome': 'granted' })).to.equal(1);
    expect(() => new LockMetrics({ resourceAttribute: 'yes' as never })).to.throw(InvalidArgumentError, /resourceAttribute/);
    expect(() => new LockMetrics({ meter: {} as never })).to.throw(InvalidArgumentError, /Meter/);
    const other = new LockMetrics({ meter: metrics.provider.getMeter('test') });
    expect(() => other.observe({} as never)).to.throw(InvalidArgumentError, /LockClient/);
    other.disable();
    expect(() => other.observe(locks!)).to.throw(InvalidArgumentError, /disabled/);
  });
});

/**
 * The garbage collector, with or without --expose-gc: `npm test` (.mocharc.json) does not pass
 * that flag, and this test must not be skipped there.
 */
function collector(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (typeof exposed === 'function') return exposed;
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/**
 * How many of `refs` are still reachable after full collections, collecting again until none is
 * or 2 s passed (the last call's own timers and ticks may hold its client for a moment; a WeakRef
 * keeps its target to the end of the job).
 */
async function reachableAfterGc(refs: readonly WeakRef<object>[]): Promise<number> {
  const gc = collector();
  for (const until = performance.now() + 2_000; performance.now() < until; ) {
    await delay(20);
    gc();
    if (refs.every((r) => r.deref() === undefined)) return 0;
  }
  return refs.filter((r) => r.deref() !== undefined).length;
}

forEachTopology('LockMetrics and closed clients', (ctx) => {
  const CLIENTS = 50;

  /** Makes CLIENTS LockClients that each take and release a lock, closes them, and returns weak references to them. */
  async function closedClients(observe: ((locks: LockClient) => void) | undefined): Promise<WeakRef<LockClient>[]> {
    const redis = await ctx.lockRedis();
    const refs: WeakRef<LockClient>[] = [];
    for (let i = 0; i < CLIENTS; i++) {
      const locks = new LockClient(redis);
      observe?.(locks);
      await (await locks.lock(`gc:{${i}}`).acquireWrite()).release();
      await locks.close();
      refs.push(new WeakRef(locks));
    }
    return refs;
  }

  it('lets go of closed clients without forget(): none stays reachable after GC (and none without LockMetrics either)', async () => {
    const metrics = new Metrics();
    const lockMetrics = new LockMetrics({ meter: metrics.provider.getMeter('test') });
    try {
      const unobserved = await closedClients(undefined);
      expect(await reachableAfterGc(unobserved), 'closed clients reachable after GC, none observed').to.equal(0);
      const observed = await closedClients((locks) => lockMetrics.observe(locks));
      expect(await reachableAfterGc(observed), 'observed closed clients reachable after GC').to.equal(0);
      // The instruments still work for a client observed now.
      const locks = new LockClient(await ctx.lockRedis());
      lockMetrics.observe(locks);
      const lease = await locks.lock('gc:{held}').acquireWrite();
      expect(await metrics.value(LOCK_METRICS.leasesHeld, {})).to.equal(1);
      await lease.release();
      await locks.close();
    } finally {
      lockMetrics.disable();
      await metrics.provider.shutdown();
    }
  });

  it('stops asking a closed client for its stats, and counts its leases no more', async () => {
    const metrics = new Metrics();
    const lockMetrics = new LockMetrics({ meter: metrics.provider.getMeter('test') });
    const locks = new LockClient(await ctx.lockRedis());
    try {
      lockMetrics.observe(locks);
      const lease = await locks.lock('gc:{closing}').acquireWrite();
      expect(await metrics.value(LOCK_METRICS.leasesHeld, {})).to.equal(1);
      const stats = sinon.spy(locks, 'stats');
      await locks.close();
      expect(lease.held).to.equal(false);
      expect(await metrics.value(LOCK_METRICS.leasesHeld, {})).to.equal(0);
      await metrics.points(LOCK_METRICS.leasesHeld);
      expect(stats.callCount, 'stats() calls after close').to.equal(0);
    } finally {
      lockMetrics.disable();
      await locks.close();
      await metrics.provider.shutdown();
    }
  });
});
