/**
 * One outage against one auto-renewed lease: a LockClient on `redis` (which
 * talks to Redis through `proxy`) takes a lease; `phaseMs` after a renewal
 * round starts, the proxy stalls every connection for `outageMs` (with
 * `cut`, then resets them: what was on the wire is lost, and the client
 * reconnects); then it waits for the state that settles it: the lease
 * renewed after the outage, or lost.
 *
 * @module
 */
import { tracingChannel } from 'node:diagnostics_channel';
import type { LockRedisClient } from '../../src/clients/index.js';
import { LockClient, TRACING_CHANNELS } from '../../src/index.js';
import type { ClusterFaultProxy, FaultProxy } from '../../src/testing/index.js';
import { eventually } from './eventually.js';

export interface OutageTrial {
  /** From the start of the renewal round before the outage to the outage's start, as it happened. */
  readonly phaseMs: number;
  /** How long the proxy stalled, as it happened. */
  readonly outageMs: number;
  readonly survived: boolean;
}

export interface OutageOptions {
  readonly leaseMs: number;
  readonly redisTimeoutMs: number;
  readonly phaseMs: number;
  readonly outageMs: number;
  readonly resource: string;
  /** The outage ends with every connection reset, not with what it held back delivered. */
  readonly cut?: boolean;
}

export async function outageTrial(redis: LockRedisClient, proxy: FaultProxy | ClusterFaultProxy, o: OutageOptions): Promise<OutageTrial> {
  const locks = new LockClient(redis, { leaseMs: o.leaseMs, redisTimeoutMs: o.redisTimeoutMs });
  const renew = tracingChannel(TRACING_CHANNELS.renew);
  let tickAt: number | undefined;
  let stallAt = 0;
  let resumedAt: number | undefined;
  let renewalsAtStall = 0;
  const handlers = {
    start: () => {
      if (tickAt !== undefined) return;
      tickAt = performance.now();
      setTimeout(() => {
        renewalsAtStall = locks.stats().renewals;
        proxy.stall();
        stallAt = performance.now();
        setTimeout(() => {
          if (o.cut) proxy.reset();
          proxy.resume();
          resumedAt = performance.now();
        }, o.outageMs);
      }, o.phaseMs);
    },
    end: () => undefined,
    asyncStart: () => undefined,
    asyncEnd: () => undefined,
    error: () => undefined,
  };
  try {
    const lease = await locks.lock(o.resource).acquireWrite();
    renew.subscribe(handlers);
    await eventually('the outage to end', () => resumedAt !== undefined, 3 * o.leaseMs + o.phaseMs + o.outageMs);
    // Settled: renewed after the outage (held for another lease), or lost.
    await eventually(
      'the lease renewed or lost after the outage',
      () => lease.signal.aborted || locks.stats().renewals > renewalsAtStall,
      2 * o.leaseMs,
    );
    const survived = !lease.signal.aborted && lease.held;
    if (survived) await lease.release();
    return { phaseMs: stallAt - tickAt!, outageMs: resumedAt! - stallAt, survived };
  } finally {
    renew.unsubscribe(handlers);
    proxy.resume();
    await locks.close();
  }
}
