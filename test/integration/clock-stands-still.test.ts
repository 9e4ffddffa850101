/**
 * Renewal on a server whose clock stands still inside a script and that has
 * no `os.clock()` (Redis 7.2, Valkey 7.2): nothing inside a call can stop
 * it, so the size of each call must keep it short, by what the calls are
 * measured to cost (src/backends/call-sizer.ts). Here the extend script runs
 * with `os.clock()` taken away; on Valkey 8 its TIME stands still too, so
 * this is that server (on Redis 7.0 TIME moves, and the script stops itself:
 * the test then checks the SLOWLOG alone).
 * 10,000 leases renewed three times put no library command in SLOWLOG at
 * 1 ms. The control runs on the master that serves the calls, and only
 * there: its stalls are that server's, and no idle master is made busy.
 */
import { expect } from 'chai';
import { extendInChunks, extendSizer } from '../../src/backends/extend-groups.js';
import { type Lease, LockClient, lockKeys } from '../../src/index.js';
import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';
import { forEachTopology } from '../setup/topologies.js';
import { commandCalls, masters } from '../support/redis-stats.js';
import { restoreSlowlog, runControl, slowAllowed, slowCommands, watchSlowlog } from '../support/slowlog.js';

const CPU_CLOCK = 'local cpuClock = osLib and osLib.clock';
/** The extend script as a server without `os.clock()` runs it. */
const WITHOUT_CPU_CLOCK = LUA_SOURCES.extend.replace(CPU_CLOCK, 'local cpuClock = nil');

forEachTopology('renewal where the clock stands still', (ctx) => {
  it('renews 10,000 leases in calls sized by their cost, with no library command over 1 ms', async function () {
    this.timeout(90_000);
    expect(WITHOUT_CPU_CLOCK, 'the script reads os.clock() where it is').to.not.equal(LUA_SOURCES.extend);
    const LEASES = 10_000;
    const redis = ctx.client();
    const nodes = await masters(redis);
    const locks = new LockClient(redis);
    let control: ReturnType<typeof runControl> | undefined;
    try {
      // Leases given a length are not renewed by the client. One hash tag: one slot, one master, one sequence of calls.
      const leases: Lease[] = [];
      for (let i = 0; i < LEASES; i += 200) {
        const batch = Array.from({ length: Math.min(200, LEASES - i) }, (_, k) =>
          locks.lock(`{still}:${i + k}`).acquireWrite({ leaseMs: 60_000 }),
        );
        leases.push(...(await Promise.all(batch)));
      }
      const shas = await Promise.all(nodes.map((node) => node.script('LOAD', WITHOUT_CPU_CLOCK) as Promise<string>));
      const requests = leases.map((lease) => ({
        keys: lockKeys('rwlock', lease.resource),
        owner: lease.token,
        leaseMs: 60_000,
        holdIds: [],
      }));
      const indexes = requests.map((_, i) => i);
      const names = (k: (typeof requests)[number]['keys']) => [k.state, k.leases, k.queue] as const;
      const elapsed: number[] = [];
      const sizer = extendSizer();
      await watchSlowlog(nodes);
      const before = await commandCalls(redis, ['evalsha']);
      // The master of the one slot every lease is in (on one server, the server).
      const port = ctx.kind === 'cluster' ? (await ctx.cluster.masterForKey('{still}')).port : ctx.server.port;
      const served = nodes.filter((node) => node.options.port === port);
      expect(served, 'the master of the leases').to.have.length(1);
      control = runControl(served);
      for (let round = 0; round < 3; round++) {
        const results = new Array<number>(LEASES).fill(NaN);
        await extendInChunks(
          requests,
          indexes,
          results,
          names,
          async (keys, args) => {
            const reply = (await redis.evalsha(shas[0]!, keys.length, ...keys, ...args)) as number[];
            elapsed.push(reply[1]!);
            return reply;
          },
          undefined,
          sizer,
        );
        expect(
          results.every((left) => left === 60_000),
          `round ${round}: every lease renewed`,
        ).to.equal(true);
      }
      await control.stop();
      const libraryCalls = (await commandCalls(redis, ['evalsha'])) - before;
      const slow = await slowCommands(nodes);
      // TIME across a busy loop inside one script: 0 where it stands still (Valkey, Redis 7.2+).
      const moved = await nodes[0]!.eval(
        "local a = redis.call('TIME') for i = 1, 1000000 do end local b = redis.call('TIME') return (b[1] - a[1]) * 1000000 + b[2] - a[2]",
        0,
      );
      if (moved === 0)
        expect(
          elapsed.every((us) => us === 0),
          'the clock stood still in every call',
        ).to.equal(true);
      expect(libraryCalls, 'calls').to.be.above(3 * (LEASES / 256));
      expect(
        slow.library.length,
        `library commands over 1 ms: ${slow.library.length} of ${libraryCalls} (${slow.library.join(', ')}); control: ${slow.control} of ${control.calls}`,
      ).to.be.at.most(slowAllowed(slow, control.calls, libraryCalls, 3));
    } finally {
      await control?.stop();
      await restoreSlowlog(nodes);
      await locks.close();
    }
  });
});
