/**
 * What renewal costs the server. Redis runs one command at a time, so a
 * renewal call blocks every other client of its node for as long as it runs:
 * each extend call stops after EXTEND_BUDGET_US of server time and the client
 * sends what it did not reach in the next call. Here: many held leases are
 * each renewed exactly once, in calls that carry at most EXTEND_MAX_LEASES;
 * and 10,000 auto-renewed leases renew period after period with no library
 * command in any master's SLOWLOG at 1 ms, nor from inspect, forceRelease and
 * the CLI's scan beside them.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { EXTEND_BUDGET_US, EXTEND_MAX_LEASES, type ExtendRound } from '../../src/backends/extend-groups.js';
import { hashLayout } from '../../src/backends/layouts.js';
import { ScriptedBackend } from '../../src/backends/scripted.js';
import { ioredisCli } from '../../src/cli/cli-redis.js';
import { scanKeys } from '../../src/cli/scan.js';
import { driverFor } from '../../src/clients/index.js';
import { LockClient, lockKeys, type RenewTraceContext, TRACING_CHANNELS } from '../../src/index.js';
import { forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { masters } from '../support/redis-stats.js';

/** The commands the library sends (every change and read of a lock is a script) and the CLI's scan. */
const LIBRARY_COMMANDS = new Set(['evalsha', 'eval', 'scan']);

/**
 * The control: a script that holds the server for the extend calls' budget
 * and does nothing else. SLOWLOG is wall time, so on a shared machine it lists
 * any command the OS took the CPU from, however little it does; the control,
 * run beside the renewal rounds, measures how often that happens to a command
 * that keeps to the budget.
 */
const CONTROL_SCRIPT = `local t = redis.call('TIME') local stop = t[1] * 1000000 + t[2] + ${EXTEND_BUDGET_US}
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= stop
return 1`;

/** SLOWLOG at 1 ms on every master, emptied. */
async function watchSlowlog(nodes: readonly Redis[]): Promise<void> {
  for (const node of nodes) {
    await node.config('SET', 'slowlog-log-slower-than', '1000');
    await node.config('SET', 'slowlog-max-len', '4096');
    await node.slowlog('RESET');
  }
}

/**
 * The library's commands (its scripts, and the CLI's SCAN) SLOWLOG lists on
 * every master, as "<µs> µs <command> (<port>)", and how many control calls
 * it lists. (It lists the commands a script runs too, when one stalls: the
 * script is listed with them.)
 */
async function slowCommands(nodes: readonly Redis[]): Promise<{ library: string[]; control: number }> {
  const library: string[] = [];
  let control = 0;
  for (const node of nodes) {
    const entries = (await node.slowlog('GET', 4096)) as [number, number, number, string[]][];
    for (const [, , usec, args] of entries) {
      const command = String(args[0]).toLowerCase();
      if (command === 'eval' && String(args[1]).startsWith(CONTROL_SCRIPT.slice(0, 60))) control++;
      else if (LIBRARY_COMMANDS.has(command)) library.push(`${usec} µs ${command} (${node.options.port})`);
    }
  }
  return { library, control };
}

/** Calls of `commands` so far on every master (INFO commandstats). */
async function calls(nodes: readonly Redis[], commands: readonly string[]): Promise<number> {
  let total = 0;
  for (const node of nodes) {
    const info = await node.info('commandstats');
    for (const command of commands) total += Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  }
  return total;
}

async function restoreSlowlog(nodes: readonly Redis[]): Promise<void> {
  for (const node of nodes) await node.config('SET', 'slowlog-log-slower-than', '10000');
}

forEachTopology('renewal batches', (ctx) => {
  it(`renews many leases of one node in calls of at most ${EXTEND_MAX_LEASES}, each lease once`, async () => {
    const redis = ctx.client();
    const locks = new LockClient(redis);
    const backend = new ScriptedBackend(driverFor(redis), hashLayout('rwlock'));
    try {
      // One hash tag: every lock in one slot, so on a Cluster too they live on one master.
      const count = 2 * EXTEND_MAX_LEASES + 1;
      const leases = [];
      for (let i = 0; i < count; i += 64) {
        const batch = Array.from({ length: Math.min(64, count - i) }, (_, k) =>
          locks.lock(`{batch}:${i + k}`).acquireWrite({ leaseMs: 10_000 }),
        );
        leases.push(...(await Promise.all(batch)));
      }
      const round: ExtendRound = { calls: 0 };
      const left = await backend.extend(
        leases.map((lease) => ({ keys: lockKeys('rwlock', lease.resource), owner: lease.token, leaseMs: 20_000 })),
        round,
      );
      expect(left).to.have.length(count);
      expect(
        left.every((ms) => ms === 20_000),
        'every lease extended',
      ).to.equal(true);
      expect(round.calls).to.be.at.least(3);
      const state = lockKeys('rwlock', leases[count - 1]!.resource).state;
      expect(await redis.pttl(state), 'the last lease extended on the server').to.be.above(10_000);
    } finally {
      await locks.close();
    }
  });

  it('holds 10,000 auto-renewed leases with no library command over 1 ms on any master', async function () {
    this.timeout(60_000);
    const LEASES = 10_000;
    const redis = ctx.client();
    const nodes = await masters(redis);
    const controls = nodes.map((node) => node.duplicate());
    // A third of the lease is the period: a round every second.
    const locks = new LockClient(redis, { leaseMs: 3_000 });
    let lost = 0;
    locks.on('lost', (_error, leases) => (lost += leases.length));
    const rounds: RenewTraceContext[] = [];
    let renewing = false;
    const channel = (event: string) => `tracing:${TRACING_CHANNELS.renew}:${event}`;
    const onStart = () => void (renewing = true);
    const onEnd = (context: unknown) => {
      renewing = false;
      rounds.push(context as RenewTraceContext);
    };
    subscribe(channel('start'), onStart);
    subscribe(channel('asyncEnd'), onEnd);
    let controlCalls = 0;
    let windowOpen = true;
    try {
      for (let i = 0; i < LEASES; i += 100) {
        await Promise.all(Array.from({ length: Math.min(100, LEASES - i) }, (_, k) => locks.lock(`held:${i + k}`).acquireWrite()));
      }
      await watchSlowlog(nodes);
      const libraryCallsBefore = await calls(nodes, ['evalsha', 'scan']);
      const from = rounds.length;
      // The control runs on every master while a round runs.
      const controlling = controls.map(async (control) => {
        while (windowOpen) {
          if (!renewing) await sleep(1);
          else {
            await control.eval(CONTROL_SCRIPT, 0);
            controlCalls++;
          }
        }
      });
      // The operator's tools beside them: inspect, forceRelease, and the CLI's scan of every lock.
      const info = await locks.inspect('held:7');
      expect(info.writer?.owner).to.be.a('string');
      expect((await locks.forceRelease('held:8')).deleted).to.have.length.above(0);
      expect(await scanKeys(ioredisCli(redis), 'rwlock:*', 'hash')).to.have.length(LEASES - 1);
      // A round that started after the reset, and ended: two ends from now.
      await eventually(
        'two renewal rounds of every lease',
        () => rounds.slice(from).filter((r) => r.holdings >= LEASES - 1).length >= 2,
        20_000,
      );
      windowOpen = false;
      await Promise.all(controlling);
      const libraryCalls = (await calls(nodes, ['evalsha', 'scan'])) - libraryCallsBefore;
      const slow = await slowCommands(nodes);

      const full = rounds.slice(from).filter((r) => r.holdings >= LEASES - 1);
      expect(
        full.every((r) => r.renewed === r.holdings - r.lost),
        'every round renewed every lease still held',
      ).to.equal(true);
      expect(
        full.every((r) => r.calls >= LEASES / EXTEND_MAX_LEASES),
        'each round reports its calls',
      ).to.equal(true);
      expect(lost, 'leases lost: only the one released by force').to.equal(1);
      // On a quiet machine nothing is listed. On a busy one, the library's calls may be listed no
      // more often than four times as often as the control's (their calls run back to back, the
      // control's one at a time), and three more: calls of 2,500 leases are listed every time.
      const controlRate = controlCalls > 0 ? slow.control / controlCalls : 0;
      expect(
        slow.library.length,
        `library commands over 1 ms: ${slow.library.length} of ${libraryCalls} (${slow.library.join(', ')}); control: ${slow.control} of ${controlCalls}`,
      ).to.be.at.most(4 * controlRate * libraryCalls + 3);
    } finally {
      windowOpen = false;
      unsubscribe(channel('start'), onStart);
      unsubscribe(channel('asyncEnd'), onEnd);
      await restoreSlowlog(nodes);
      await locks.close();
      for (const control of controls) control.disconnect();
    }
  });
});
