import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { driverFor } from '../../src/clients/index.js';
import { commandName } from '../../src/clients/ioredis.js';
import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';
import { forEachTopology } from '../setup/topologies.js';
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
