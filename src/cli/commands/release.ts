import { lockFootprint } from '../../force-release.js';
import { type CliCommand, EXIT, UsageError } from '../command.js';
import { json } from '../format.js';
import { checkLockOptions, LOCK_OPTIONS, LOCK_OPTIONS_HELP, lockClientFor, modeOf } from '../lock-options.js';
import { describeLock } from './inspect.js';

export const release: CliCommand = {
  name: 'release',
  summary: 'force-release one lock: delete its keys and wake its waiters',
  usage: 'redis-rwlock release --force <resource> [--yes] [--mode hash|legacy|bridge] [--prefix p] [--json]',
  help: `Deletes every key of one lock, whoever holds it, and publishes a wake-up
on its channel(s) so that waiting clients try again at once. For a lock whose
holder died without releasing it and whose lease is too long to wait out.

Holders are not told: a LockClient finds its lease lost at its next renewal
(its lease's signal aborts, LockLostError), and until then may still act as
if it held the lock. Old processes holding a legacy key are not told at all.
Use it on a lock whose holder you know is gone.

Shows the lock and asks for confirmation on a terminal; --yes skips the
question (needed when not on a terminal, e.g. in scripts).

In legacy and bridge mode it also deletes the two legacy keys, the registry
of their readers, and the state legacy-mode clients keep beside them.

Options:
  --force               required: this deletes the lock whatever its holders believe
  -y, --yes             do not ask for confirmation
${LOCK_OPTIONS_HELP}

Exit codes: 0 released, 1 failed, 2 bad command line, 3 the lock had no keys
(nothing deleted), 5 not confirmed.`,
  options: { force: { type: 'boolean' }, yes: { type: 'boolean', short: 'y' }, ...LOCK_OPTIONS },
  positionals: { min: 1, max: 1, names: '<resource>' },
  async run(ctx) {
    if (ctx.values.force !== true) {
      throw new UsageError("release deletes a lock's keys whatever its holders believe; pass --force to say you mean it");
    }
    const resource = ctx.positionals[0]!;
    checkLockOptions(ctx.values);
    const layout = modeOf(ctx.values);
    const redis = await ctx.redis();
    const locks = lockClientFor(redis.client, ctx.values);
    try {
      const lock = locks.lock(resource);
      const { names } = lockFootprint(lock.keys, locks.options.prefix);
      const exists = await Promise.all(names.map((k) => redis.command(['EXISTS', k])));
      const present = names.filter((_, i) => exists[i] === 1);
      const info = await lock.inspect();
      if (present.length === 0) {
        if (ctx.json) ctx.io.out(json({ resource, layout, released: false, deleted: [] }));
        else ctx.io.out(`lock "${resource}" has no keys: nothing to release\n`);
        return EXIT.NOTHING;
      }
      if (ctx.values.yes !== true) {
        if (!ctx.io.interactive) {
          ctx.io.err(`redis-rwlock release: not on a terminal, so there is nobody to confirm; pass --yes to release "${resource}"\n`);
          return EXIT.CANCELLED;
        }
        ctx.io.out(`${describeLock(info, layout, lock.keys.slot)}\n\n`);
        const answer = await ctx.io.ask(
          `Delete ${present.length} key(s) of lock "${resource}" (${present.join(', ')})? Its holders will lose it. [y/N] `,
        );
        if (!/^y(es)?$/i.test(answer.trim())) {
          ctx.io.out('not released\n');
          return EXIT.CANCELLED;
        }
      }
      const { deleted } = await locks.forceRelease(resource);
      if (ctx.json) {
        ctx.io.out(json({ resource, layout, released: true, deleted, before: info }));
      } else {
        ctx.io.out(
          `released "${resource}": deleted ${deleted.join(', ') || 'nothing (its keys had gone meanwhile)'} and woke its waiters` +
            (info.mode === 'free'
              ? '\n'
              : `; its ${info.mode === 'write' ? 'writer' : 'readers'} will find the lock lost at their next renewal\n`),
        );
      }
      return EXIT.OK;
    } finally {
      await locks.close();
    }
  },
};
