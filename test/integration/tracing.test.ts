/**
 * The diagnostics_channel tracing channels: what a subscriber (an APM agent,
 * an OpenTelemetry instrumentation) sees for acquisitions, releases,
 * extensions and renewal rounds against a real Redis.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { tracingChannel } from 'node:diagnostics_channel';
import { expect } from 'chai';
import {
  AcquireTimeoutError,
  type AcquireTraceContext,
  type LeaseTraceContext,
  LockClient,
  LockLostError,
  LockNotHeldError,
  type RenewTraceContext,
  TRACING_CHANNELS,
} from '../../src/index.js';
import { forEachTopology, NODE_REDIS_IN_CI_AND_GLIDE } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { scriptCalls } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';

type Phase = 'start' | 'end' | 'asyncStart' | 'asyncEnd' | 'error';

/** Every event of one tracing channel, in order, with the context (the same object for one operation). */
class Recorder<C extends object> {
  readonly events: { phase: Phase; context: C; store: unknown }[] = [];
  private readonly channel;
  private readonly handlers;

  constructor(
    name: string,
    private readonly store?: AsyncLocalStorage<unknown>,
  ) {
    this.channel = tracingChannel<unknown, C>(name);
    const on = (phase: Phase) => (context: C) => this.events.push({ phase, context, store: this.store?.getStore() });
    this.handlers = { start: on('start'), end: on('end'), asyncStart: on('asyncStart'), asyncEnd: on('asyncEnd'), error: on('error') };
    this.channel.subscribe(this.handlers);
    if (store) this.channel.start.bindStore(store, (context) => context);
  }

  /** The operations seen, each as its context and its phases in order. */
  operations(): { context: C; phases: Phase[] }[] {
    const byContext = new Map<C, Phase[]>();
    for (const e of this.events) {
      const phases = byContext.get(e.context) ?? [];
      phases.push(e.phase);
      byContext.set(e.context, phases);
    }
    return [...byContext].map(([context, phases]) => ({ context, phases }));
  }

  close(): void {
    this.channel.unsubscribe(this.handlers);
    if (this.store) this.channel.start.unbindStore(this.store);
  }
}

forEachTopology('tracing channels', { clients: NODE_REDIS_IN_CI_AND_GLIDE }, (ctx) => {
  let locks: LockClient;
  const recorders: Recorder<object>[] = [];
  const record = <C extends object>(name: string, store?: AsyncLocalStorage<unknown>): Recorder<C> => {
    const r = new Recorder<C>(name, store);
    recorders.push(r as unknown as Recorder<object>);
    return r;
  };

  beforeEach(async () => {
    locks = new LockClient(await ctx.lockRedis(), { recheckMs: 50 });
  });
  afterEach(async () => {
    for (const r of recorders.splice(0)) r.close();
    await locks.close();
  });

  it('publishes a granted acquire and its release, with owner, fence and times, inside the start store', async () => {
    const store = new AsyncLocalStorage<unknown>();
    const acquires = record<AcquireTraceContext>(TRACING_CHANNELS.acquire, store);
    const releases = record<LeaseTraceContext>(TRACING_CHANNELS.release);
    const lease = await locks.lock('traced:1').acquireWrite();
    await lease.release();

    const [acquire, ...more] = acquires.operations();
    expect(more).to.have.length(0);
    expect(acquire!.phases).to.deep.equal(['start', 'end', 'asyncStart', 'asyncEnd']);
    expect(acquire!.context).to.include({
      resource: 'traced:1',
      mode: 'write',
      waiting: true,
      owner: lease.token,
      outcome: 'granted',
      fence: lease.fence,
      attempts: 1,
    });
    expect(acquire!.context.waitedMs).to.be.a('number').and.at.least(0);
    expect((acquire!.context as { result?: unknown }).result).to.equal(lease);
    // The continuation runs in the store bound to `start`: a span kept there is the parent of what follows.
    const asyncEnd = acquires.events.find((e) => e.phase === 'asyncEnd')!;
    expect(asyncEnd.store).to.equal(acquire!.context);

    const [release] = releases.operations();
    expect(release!.phases).to.deep.equal(['start', 'end', 'asyncStart', 'asyncEnd']);
    expect(release!.context).to.include({
      resource: 'traced:1',
      mode: 'write',
      owner: lease.token,
      fence: lease.fence,
      outcome: 'released',
    });
    expect(release!.context.heldMs).to.be.at.least(0);
  });

  it('marks an acquire a release handed the lock to: no try after the wake-up', async () => {
    const acquires = record<AcquireTraceContext>(TRACING_CHANNELS.acquire);
    const redis = ctx.client();
    // Re-checks every 5 s: the waiter tries once, again right after subscribing, then sleeps.
    const [holder, waiter] = [
      new LockClient(await ctx.lockRedis()),
      new LockClient(await ctx.lockRedis(), { recheckMs: 5_000, leaseMs: 30_000 }),
    ];
    try {
      const before = await scriptCalls(redis);
      const held = await holder.lock('traced:handed').acquireWrite();
      const waiting = waiter.lock('traced:handed').acquireWrite({ waitMs: 10_000 });
      await eventually('the holder acquire and both tries of the waiter', async () => (await scriptCalls(redis)) === before + 3);
      await held.release();
      const lease = await waiting;
      const [, handed] = acquires.operations();
      expect(handed!.context).to.include({ outcome: 'granted', handed: true, attempts: 2, fence: lease.fence });
      // Extended at once from the waiter's queue heartbeat (10.1 s) to its own lease.
      await eventually('the handed lease to be extended', async () => (await holder.inspect('traced:handed')).writer!.ttlMs > 20_000);
      await lease.release();
    } finally {
      await Promise.all([holder.close(), waiter.close()]);
    }
  });
  it('publishes a wait: attempts and waited time; a timeout with its error; a busy try without one', async () => {
    const acquires = record<AcquireTraceContext>(TRACING_CHANNELS.acquire);
    const lock = locks.lock('traced:2');
    const held = await lock.acquireWrite();
    const other = new LockClient(await ctx.lockRedis(), { recheckMs: 50 });
    try {
      // Long enough for a second try on a loaded machine: the first try, then the subscription (up to recheckMs).
      const timeout = await rejection(other.lock('traced:2').acquireRead({ waitMs: 1_000 }));
      expect(timeout).to.be.instanceOf(AcquireTimeoutError);
      expect(await other.lock('traced:2').tryAcquireWrite()).to.equal(null);
      const waiting = other.lock('traced:2').acquireWrite({ waitMs: 10_000 });
      await eventually('the writer to queue', async () => (await lock.inspect()).queue.length === 1);
      await held.release();
      const granted = await waiting;
      await granted.release();

      const ops = acquires.operations().map((o) => o.context);
      expect(ops.map((c) => c.outcome)).to.deep.equal(['granted', 'timeout', 'busy', 'granted']);
      const [, timedOut, busy, waited] = acquires.operations();
      expect(timedOut!.phases).to.deep.equal(['start', 'end', 'error', 'asyncStart', 'asyncEnd']);
      expect((timedOut!.context as { error?: unknown }).error).to.equal(timeout);
      expect(timedOut!.context.waitedMs).to.be.at.least(990);
      expect(timedOut!.context.attempts).to.be.greaterThan(1);
      expect(busy!.phases).to.deep.equal(['start', 'end', 'asyncStart', 'asyncEnd']);
      expect(busy!.context).to.include({ waiting: false, attempts: 1, fence: undefined });
      expect((busy!.context as { result?: unknown }).result).to.equal(null);
      expect(waited!.context).to.include({ owner: granted.token, fence: granted.fence });
      // One try or more: the channel was still subscribed from the wait before, so the writer
      // watched before its first try, and may have been handed the lock without another.
      expect(waited!.context.attempts).to.be.at.least(1);
      expect(waited!.context.handed).to.be.a('boolean');
    } finally {
      await other.close();
    }
  });

  it('publishes extensions, and a release of a lease no longer held as not-held', async () => {
    const extends_ = record<LeaseTraceContext>(TRACING_CHANNELS.extend);
    const releases = record<LeaseTraceContext>(TRACING_CHANNELS.release);
    const lease = await locks.lock('traced:3').acquireRead({ leaseMs: 5_000 });
    await lease.extend(8_000);
    await locks.lock('traced:3').inspect(); // nothing traced
    await ctx.flush(); // the lock's keys are gone: Redis no longer holds it
    const error = await rejection(lease.release());
    expect(error).to.be.instanceOf(LockNotHeldError);
    const extendFailure = await rejection(lease.extend());
    expect(extendFailure).to.be.instanceOf(LockLostError); // already lost: nothing sent, still traced

    expect(extends_.operations().map((o) => [o.context.outcome, o.phases.includes('error')])).to.deep.equal([
      ['extended', false],
      ['not-held', true],
    ]);
    const [release] = releases.operations();
    expect(release!.context).to.include({ outcome: 'not-held', owner: lease.token, mode: 'read' });
    expect(release!.phases).to.include('error');
  });

  it('publishes each renewal round with the holdings it renewed', async () => {
    const renewals = record<RenewTraceContext>(TRACING_CHANNELS.renew);
    const fast = new LockClient(await ctx.lockRedis(), { leaseMs: 1_500 }); // renews every 500 ms; a late round still finds both held
    try {
      const a = await fast.lock('traced:4').acquireWrite();
      const b = await fast.lock('traced:5').acquireRead();
      // A round may come between the two grants (a slow Cluster, a loaded machine): wait for one after both.
      const bothHeld = (o: { phases: string[]; context: RenewTraceContext }) => o.phases.includes('asyncEnd') && o.context.holdings === 2;
      await eventually('a renewal round of both holdings', () => renewals.operations().some(bothHeld));
      const round = renewals.operations().find(bothHeld)!;
      expect(round.phases).to.deep.equal(['start', 'end', 'asyncStart', 'asyncEnd']);
      expect(round.context).to.include({ holdings: 2, renewed: 2, lost: 0, unreached: 0 });
      // One call per node: the two locks may lie on two Cluster masters.
      expect(round.context.calls).to.be.within(1, ctx.kind === 'cluster' ? 2 : 1);
      await a.release();
      await b.release();
    } finally {
      await fast.close();
    }
  });

  it('publishes nothing once the subscriber is gone', async () => {
    const acquires = record<AcquireTraceContext>(TRACING_CHANNELS.acquire);
    await (await locks.lock('traced:6').acquireRead()).release();
    expect(acquires.events).to.have.length(4);
    acquires.close();
    await (await locks.lock('traced:6').acquireRead()).release();
    expect(acquires.events).to.have.length(4);
  });
});
