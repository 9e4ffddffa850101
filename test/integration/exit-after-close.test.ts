// close() while the hub has echo checks pending and a
// resubscription armed (the server stopped by SIGSTOP): the process exits
// once the LockClients and the Redis clients are closed. The worker's
// LockClients check their links every LINK_CHECK_MS, so that it reaches that
// state in a few of those rather than of the default 2.5 s.
import { fork } from 'node:child_process';
import { expect } from 'chai';
import { startRedisServer } from '../../src/testing/index.js';
import { NODE_REDIS_IN_CI, selectedClients, selectedTopologies } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';

/** The worker's `linkCheckMs`: a fifth of the default. */
const LINK_CHECK_MS = 500;

if (selectedTopologies().includes('standalone')) {
  describe('the process exits after close() with the server stopped', () => {
    for (const kind of selectedClients(NODE_REDIS_IN_CI)) {
      it(`${kind}: exits within 5 s of closing everything`, async function () {
        this.timeout(60_000);
        const redis = await startRedisServer();
        try {
          const worker = new URL('../workers/exit-after-close-worker.ts', import.meta.url).pathname;
          const child = fork(worker, [kind, String(redis.port), String(LINK_CHECK_MS)], {
            execArgv: ['--import', 'tsx'],
            stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
          });
          let closedAt: number | undefined;
          const admin = redis.client();
          /** The waiter's channel and its link's echo channel subscribed, and an echo sent: the echo check runs. */
          const echoing = async () =>
            ((await admin.call('PUBSUB', 'SHARDCHANNELS')) as string[]).length >= 2 &&
            Number(/^cmdstat_spublish:calls=(\d+)/m.exec(await admin.info('commandstats'))?.[1] ?? 0) >= 1;
          child.on('message', (m) => {
            if (m === 'stop-server') {
              void eventually('the echo check running', echoing, 20_000)
                .finally(() => admin.disconnect())
                .then(() => redis.pause())
                .then(
                  () => child.send('stopped'),
                  (error: Error) => console.error(`      ${error.message}`),
                );
            }
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
