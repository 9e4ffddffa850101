import { DEMO_HELP, DEMO_SUMMARY, DEMO_SYNOPSIS, runDemo } from '../../demo/index.js';
import type { CliCommand } from '../command.js';

/** The demo's options that take a value, passed through as they were given. */
const VALUE_OPTIONS = ['duration', 'processes', 'readers', 'writers', 'values', 'parts', 'redis', 'cluster'] as const;

/**
 * `redis-rwlock demo`: the cache-rebuild demo (src/demo). It makes its own
 * connections (and, without --redis/--cluster, its own embedded Cluster) and
 * worker processes, and draws its live progress on the terminal itself, so it
 * uses neither `ctx.redis()` nor `ctx.io`. Its workers are this same command
 * run again (see src/demo/index.ts).
 */
export const demo: CliCommand = {
  name: 'demo',
  summary: DEMO_SUMMARY,
  usage: DEMO_SYNOPSIS,
  help: DEMO_HELP,
  options: {
    duration: { type: 'string' },
    processes: { type: 'string' },
    readers: { type: 'string' },
    writers: { type: 'string' },
    values: { type: 'string' },
    parts: { type: 'string' },
    'without-locks': { type: 'boolean' },
  },
  positionals: { min: 0, max: 0, names: '' },
  run(ctx) {
    const argv: string[] = [];
    for (const name of VALUE_OPTIONS) {
      const value = ctx.values[name];
      if (typeof value === 'string') argv.push(`--${name}`, value);
    }
    if (ctx.values['without-locks'] === true) argv.push('--without-locks');
    if (ctx.json) argv.push('--json');
    return runDemo(argv);
  },
};
