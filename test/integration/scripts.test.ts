import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { driverFor } from '../../src/clients/index.js';
import { commandName } from '../../src/clients/ioredis.js';
import { LockClient } from '../../src/index.js';
import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';
import { forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { masters } from '../support/redis-stats.js';

forEachTopology('Lua scripts', (ctx) => {
  for (const [name, lua] of Object.entries(LUA_SOURCES)) {
    it(`${name} loads on every master, under the SHA the client sends`, async () => {
      const redis = ctx.client();
      driverFor(redis); // defines the scripts on it
      const sha = createHash('sha1').update(lua).digest('hex');
      // ioredis keeps the Script it sends EVALSHA with under the command's name.
      const script = (redis as unknown as { scriptsSet: Record<string, { sha: string }> }).scriptsSet[
        commandName(name as keyof typeof LUA_SOURCES)
      ];
      expect(script?.sha).to.equal(sha);
      for (const node of await masters(redis)) expect(await node.script('LOAD', lua)).to.equal(sha);
    });
  }
});

/** How an `INFO` command starts on the wire. */
const INFO = '*2\r\n$4\r\nINFO\r\n';

forEachTopology('Script calls', (ctx) => {
  it('go out together when many are sent in one tick (8 first, then 16 a write), in order with the rest; a lone one at once', async () => {
    const redis = ctx.client();
    const locks = new LockClient(redis);
    try {
      await (await locks.lock('{w}:warm').acquireWrite()).release(); // server check done, scripts loaded
      // One slot, so on the Cluster every call goes to one master's connection.
      const names = Array.from({ length: 40 }, (_, i) => `{w}:${i}`);
      // Commands per socket write.
      let writes: number[] = [];
      const nodes = await masters(redis);
      // Nothing of anyone's in flight (a Cluster client's slot refresh, a check of the LockClient's), so
      // that the next call is written at once: the library holds a call back only behind others.
      const idle = () =>
        eventually('nothing in flight on the masters', () =>
          nodes.every((node) => (node as unknown as { commandQueue: { length: number } }).commandQueue.length === 0),
        );
      for (const node of nodes) {
        if (!node.stream) continue; // not connected: nothing goes to it
        const stream = node.stream as unknown as Record<'_write' | '_writev', (...args: unknown[]) => void>;
        for (const method of ['_write', '_writev'] as const) {
          const original = stream[method].bind(stream);
          stream[method] = (...args: unknown[]) => {
            const chunks = method === '_writev' ? (args[0] as { chunk: unknown }[]).map((c) => c.chunk) : [args[0]];
            // The LockClient's eviction check (INFO memory) may read a master again meanwhile: not counted.
            const commands = chunks.filter((chunk) => !String(chunk).startsWith(INFO)).length;
            if (commands > 0) writes.push(commands);
            original(...args);
          };
        }
      }
      await idle();
      writes = [];
      const lone = locks.lock('{w}:lone').acquireWrite();
      expect(writes).to.deep.equal([1]); // nothing was in flight: written at once
      await (await lone).release();
      await idle();
      writes = [];
      const before = redis.set('{w}:mark', 'before');
      const leases = await Promise.all(names.map((name) => locks.lock(name).acquireWrite()));
      const after = redis.get('{w}:mark');
      expect(await before).to.equal('OK');
      expect(await after).to.equal('before');
      // 42 commands, 40 of them script calls. The mark goes at once (nothing in flight), and so
      // does the tick's first script call (a stall after it must not hold it back); then a first
      // batch of 8, so the server starts while the client makes the rest, then 16 a write (the
      // mark's read joins the last, or follows it).
      const sent = [...writes];
      expect(sent.slice(0, 3), `commands per write: ${sent}`).to.deep.equal([1, 1, 8]);
      expect(Math.max(...sent), `commands per write: ${sent}`).to.be.at.most(17);
      expect(sent.reduce((a, b) => a + b, 0)).to.equal(42);
      expect(sent).to.have.length.within(5, 6);
      await Promise.all(leases.map((lease) => lease.release()));
    } finally {
      await locks.close();
    }
  });

  if (ctx.kind === 'standalone') {
    it("never hash the lock's Cluster slot on one server", async () => {
      const locks = new LockClient(ctx.client());
      try {
        const lock = locks.lock('no-slot');
        Object.defineProperty(lock.keys, 'slot', {
          get: () => {
            throw new Error('the slot was read');
          },
        });
        await (await lock.acquireWrite()).release();
        await (await lock.acquireRead()).release();
      } finally {
        await locks.close();
      }
    });
  }
});
