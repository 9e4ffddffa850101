/**
 * `redlock` mode's safety through a starved holder: whenever a majority
 * grants the lock to another owner, the first holder's lease must already
 * read as not held. The holder's event loop is blocked (a busy loop, as CPU
 * starvation or a long GC pause would) up to about when its lease runs out,
 * with a minority of the servers killed; then another client tries the lock
 * at once, before the holder's timers or replies run. Three independent
 * servers, on ioredis (npm test), node-redis and GLIDE (npm run
 * test:clients).
 */
import { tracingChannel } from 'node:diagnostics_channel';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { LockRedisClient } from '../../src/clients/index.js';
import { type Lease, LockClient, TRACING_CHANNELS } from '../../src/index.js';
import { type RedisMastersHandle, startRedisMasters } from '../../src/testing/index.js';
import { disconnect, NODE_REDIS_IN_CI_AND_GLIDE, selectedClients } from '../setup/topologies.js';
import { connectLockClient } from '../support/targets.js';

const N = 3;
const QUORUM = 2;
const LEASE_MS = 450;
const NODE_TIMEOUT_MS = 200;
/** Leases, and stalls per lease (until another owner gets it). */
const LEASES = 25;
const PROBES = 4;
/**
 * What comes before the stall that runs up to when the servers let the lease
 * go: a random pause (renewals run, and the stall starts at any phase of the
 * next); or a first stall that starts as a renewal round was sent and ends a
 * little before the lease's local deadline, so that the round's answers are
 * read late, and the deadline they set is the one the second stall tests.
 */
const BEFORE = ['a pause', 'a renewal answered late'] as const;

/** Blocks the event loop for `ms`, as a starved CPU does: no timer, no reply is handled meanwhile. */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** The lease's local deadline (performance.now; internal): where the first of two stalls ends. */
function localDeadlineOf(lease: Lease): number {
  return (lease.holding as { expiresAt: number }).expiresAt;
}

/** One stall and the other client's try after it. */
interface Probe {
  before: (typeof BEFORE)[number];
  /** How far past the servers' deadline the stall ended (ms; negative: before it). */
  offsetMs: number;
  granted: boolean;
  /** `held` read right after the other client's try resolved. */
  heldAfter: boolean;
  /** When the lease's signal aborted, from when the other try was sent (ms; negative: before). */
  abortedAfterSendMs: number | undefined;
}

for (const clientKind of selectedClients(NODE_REDIS_IN_CI_AND_GLIDE)) {
  describe(`redlock: a holder whose event loop stalls [${N} servers, ${clientKind}]`, function () {
    this.timeout(120_000);
    let masters: RedisMastersHandle;
    /** Admin connections to the servers left running. */
    let live: Redis[];
    const clients: LockRedisClient[] = [];
    const locks: LockClient[] = [];

    const renewals = tracingChannel(TRACING_CHANNELS.renew);
    let renewalStarted: (() => void) | undefined;
    let renewalEnded: (() => void) | undefined;
    const onRenewal = {
      start: () => {
        renewalStarted?.();
        renewalStarted = undefined;
      },
      end: () => undefined,
      asyncStart: () => undefined,
      asyncEnd: () => {
        renewalEnded?.();
        renewalEnded = undefined;
      },
      error: () => undefined,
    };
    /** Resolves as the next renewal round starts (its calls are written in the same tick). */
    const nextRenewal = () =>
      new Promise<void>((resolve) => {
        renewalStarted = resolve;
      });
    /** Resolves as the renewal round in progress ends (the deadlines it set are set). */
    const renewalEnd = () =>
      new Promise<void>((resolve) => {
        renewalEnded = resolve;
      });

    before(async function () {
      this.timeout(60_000);
      masters = await startRedisMasters(N);
      const admin = masters.clients();
      for (const a of admin.slice(0, N - QUORUM)) a.disconnect(); // their servers get killed
      live = admin.slice(N - QUORUM);
      renewals.subscribe(onRenewal);
    });
    after(async () => {
      renewals.unsubscribe(onRenewal);
      await Promise.allSettled(locks.map((l) => l.close()));
      for (const c of clients) disconnect(c);
      for (const a of live ?? []) a.disconnect();
      await masters?.stop();
    });

    beforeEach(async () => {
      for (const s of masters.servers) if (!s.running) await s.restart();
      await masters.flush();
    });

    const open = async (leaseMs = LEASE_MS): Promise<LockClient> => {
      const nodes = await Promise.all(
        masters.servers.map((s) => connectLockClient({ kind: 'standalone', nodes: [s], client: clientKind })),
      );
      clients.push(...nodes);
      const client = new LockClient(nodes, { mode: 'redlock', leaseMs, redlock: { nodeTimeoutMs: NODE_TIMEOUT_MS } });
      locks.push(client);
      return client;
    };

    /**
     * When (performance.now) another owner can get a majority: when both
     * live servers let `lease` go (their deadlines in unix ms: the same clock
     * here).
     */
    const serversDeadlineOf = async (locks: LockClient, lease: Lease): Promise<number> => {
      const { state, leases } = locks.lock(lease.resource).keys;
      const at = await Promise.all(
        live.map(async (a) => {
          const score = await a.zscore(leases, lease.token);
          return score === null ? a.pexpiretime(state) : Number(score); // a sole holder: the hash's expiry
        }),
      );
      return Math.max(...at) - Date.now() + performance.now();
    };

    it('never reads a lease as held once a majority granted the lock to another owner (one server killed)', async () => {
      const holder = await open();
      const other = await open();
      // Both clients' first calls (the server check, the scripts loaded) are behind them.
      for (const c of [holder, other]) await (await c.lock('warm-up').acquireWrite()).release();
      await masters.servers[0]!.kill('SIGKILL');

      const probes: Probe[] = [];
      for (let i = 0; i < LEASES; i++) {
        const lease = await holder.lock(`job:${i}`).acquireWrite();
        let abortedAt: number | undefined;
        lease.signal.addEventListener('abort', () => {
          abortedAt = performance.now();
        });
        // Several stalls per lease: a deadline set wrong as one stall ends shows at the next.
        for (let probe = 0; probe < PROBES && lease.held; probe++) {
          const before = BEFORE[Math.floor(Math.random() * BEFORE.length)]!;
          if (before === 'a pause') await sleep(Math.random() * LEASE_MS);
          else {
            // Not when the lease runs out first (a starved process): no round would come.
            if (!(await Promise.race([nextRenewal().then(() => true), once(lease.signal, 'abort').then(() => false)]))) continue;
            const ended = renewalEnd();
            await new Promise((resolve) => setImmediate(resolve)); // its calls written
            stall(Math.max(0, localDeadlineOf(lease) - 5 - Math.random() * 10 - performance.now()));
            await ended; // its answers read
            if (!lease.held) continue;
          }
          const target = await serversDeadlineOf(holder, lease);
          const offsetMs = Math.random() * 30 - 15;
          stall(Math.max(0, target + offsetMs - performance.now()));
          const sentAt = performance.now();
          const read = await other.lock(`job:${i}`).tryAcquireRead();
          const heldAfter = lease.held;
          probes.push({
            before,
            offsetMs: Math.round(offsetMs),
            granted: read !== null,
            heldAfter,
            abortedAfterSendMs: abortedAt === undefined ? undefined : Math.round(abortedAt - sentAt),
          });
          await read?.release();
        }
        if (lease.held) await lease.release().catch(() => undefined);
      }

      const unsafe = probes.filter((p) => p.granted && p.heldAfter);
      expect(unsafe, `granted to another owner while still held: ${JSON.stringify(unsafe)}`).to.deep.equal([]);
      // The boundary was crossed: some stalls outlasted the servers' deadlines, and another owner got the lock.
      expect(
        probes.filter((p) => p.granted),
        JSON.stringify(probes),
      ).to.not.deep.equal([]);
    });

    it('renews with the answers that came in during a stall longer than nodeTimeoutMs', async () => {
      const holder = await open(900); // renewed every 300 ms: some 600 ms left as a round starts
      const lease = await holder.lock('steady').acquireWrite();
      const renewed = holder.stats().renewals;
      await nextRenewal();
      const ended = renewalEnd();
      await new Promise((resolve) => setImmediate(resolve)); // its calls written
      const left = localDeadlineOf(lease) - performance.now();
      stall(NODE_TIMEOUT_MS + 100); // answered meanwhile: the timeout's timer runs before they are read
      await ended;
      expect(left, 'the lease outlasts the stall').to.be.above(NODE_TIMEOUT_MS + 200);
      expect(holder.stats().renewals, 'renewed by that round').to.equal(renewed + 1);
      expect(lease.held).to.equal(true);
      await lease.release();
    });
  });
}
