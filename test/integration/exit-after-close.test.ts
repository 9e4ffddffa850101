// close() while the hub has echo checks pending and a
// resubscription armed (the server stopped by SIGSTOP): the process exits
// once the LockClients and the Redis clients are closed.
import { fork } from 'node:child_process';
import { expect } from 'chai';
import { startRedisServer } from '../../src/testing/index.js';
import { NODE_REDIS_IN_CI, selectedClients, selectedTopologies } from '../setup/topologies.js';

if (selectedTopologies().includes('standalone')) {
  describe('the process exits after close() with the server stopped', () => {
    for (const kind of selectedClients(NODE_REDIS_IN_CI)) {
      it(`${kind}: exits within 5 s of closing everything`, async function () {
        this.timeout(60_000);
        const redis = await startRedisServer();
        try {
          const child = fork(new URL('../workers/exit-after-close-worker.ts', import.meta.url).pathname, [kind, String(redis.port)], {
            execArgv: ['--import', 'tsx'],
            stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
          });
          let closedAt: number | undefined;
          child.on('message', (m) => {
            if (m === 'stop-server') void redis.pause().then(() => child.send('stopped'));
            if (m === 'closed') closedAt = performance.now();
          });
          const exited = await new Promise<number>((resolve) => {
            const timer = setTimeout(() => resolve(-1), 45_000);
            child.on('exit', () => {
              clearTimeout(timer);
              resolve(performance.now());
            });
          });
          if (exited < 0) child.kill('SIGKILL');
          const after = closedAt === undefined || exited < 0 ? undefined : Math.round(exited - closedAt);
          console.log(
            `      [standalone, ${kind}] exited ${after === undefined ? 'never (killed after 45 s)' : `${after} ms after close`}`,
          );
          expect(closedAt, 'the worker closed everything').to.be.a('number');
          expect(after, 'ms from close to exit').to.be.a('number').below(5_000);
        } finally {
          await redis.resume().catch(() => undefined);
          await redis.stop();
        }
      });
    }
  });
}
