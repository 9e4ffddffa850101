import { DEMO_HELP, DEMO_OWN_OPTIONS, DEMO_SUMMARY, DEMO_SYNOPSIS, demoOptions } from '../../demo/args.js';
import type { CliCommand } from '../command.js';

/**
 * `redis-rwlock demo`: the cache-rebuild demo (src/demo). It makes its own
 * connections (and, without --redis/--cluster, its own embedded Cluster) and
 * worker processes, and draws its live progress on the terminal itself, so it
 * uses neither `ctx.redis()` nor `ctx.io`. Its workers are this same command
 * run again (see src/demo/index.ts). The CLI parses its options, with the
 * same parser and host syntax as every other command. The demo runs on
 * ioredis, loaded only when it runs, so that every other command works
 * without it.
 */
export const demo: CliCommand = {
  name: 'demo',
  summary: DEMO_SUMMARY,
  usage: DEMO_SYNOPSIS,
  help: DEMO_HELP,
  options: DEMO_OWN_OPTIONS,
  positionals: { min: 0, max: 0, names: '' },
  async run(ctx) {
    const options = await demoOptions(ctx.values, process.env, ctx.io);
    const { runDemoWith } = await import('../../demo/index.js').catch((error: unknown) => {
      const code = (error as { code?: unknown }).code;
      if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && /'ioredis'/.test((error as Error).message)) {
        throw new Error('the demo runs on ioredis, which is not installed: npm install ioredis');
      }
      throw error;
    });
    return runDemoWith(options);
  },
};
