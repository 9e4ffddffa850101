import { DEMO_HELP, DEMO_OWN_OPTIONS, DEMO_SUMMARY, DEMO_SYNOPSIS, demoOptions, runDemoWith } from '../../demo/index.js';
import type { CliCommand } from '../command.js';

/**
 * `redis-rwlock demo`: the cache-rebuild demo (src/demo). It makes its own
 * connections (and, without --redis/--cluster, its own embedded Cluster) and
 * worker processes, and draws its live progress on the terminal itself, so it
 * uses neither `ctx.redis()` nor `ctx.io`. Its workers are this same command
 * run again (see src/demo/index.ts). The CLI parses its options, with the
 * same parser and host syntax as every other command.
 */
export const demo: CliCommand = {
  name: 'demo',
  summary: DEMO_SUMMARY,
  usage: DEMO_SYNOPSIS,
  help: DEMO_HELP,
  options: DEMO_OWN_OPTIONS,
  positionals: { min: 0, max: 0, names: '' },
  async run(ctx) {
    return runDemoWith(await demoOptions(ctx.values, process.env, ctx.io));
  },
};
