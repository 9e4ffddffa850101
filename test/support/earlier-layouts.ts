/**
 * The hash-mode lock scripts of earlier storage layouts, kept verbatim in
 * test/fixtures/: `layout-before-version`, lua/ at commit 168a3c6 (the last
 * to change it before the layout version came: its hashes carry no `v`, and
 * it checks none), and `layout-1`, lua/ at commit 509a4df (the last of
 * layout 1). A process of such a build sends these during a rolling deploy,
 * with the KEYS and ARGV of its day: owner, leaseMs, ..., holdId (today's
 * scripts take the lease first and the hold as one string).
 */
import { readFileSync } from 'node:fs';
import type { LockKeys } from '../../src/keys/keys.js';
import type { RedisClient } from '../../src/redis.js';

/** Which earlier build: see the module doc. */
export type OldBuild = 'layout-before-version' | 'layout-1';

/** A script with its `-- @include`s pasted in, as scripts/gen-lua.mjs does. */
function expand(text: string, fixture: URL): string {
  return text.replace(/^-- @include (\S+)$/gm, (_, name: string) =>
    expand(readFileSync(new URL(`includes/${name}.lua`, fixture), 'utf8'), fixture),
  );
}

function scriptsOf(build: OldBuild) {
  const fixture = new URL(`../fixtures/${build}/lua/`, import.meta.url);
  const script = (name: string) => expand(readFileSync(new URL(`${name}.lua`, fixture), 'utf8'), fixture);
  return {
    acquireRead: script('acquire-read'),
    acquireWrite: script('acquire-write'),
    release: script('release'),
    extend: script('extend'),
  };
}

/** An acquire's reply: the bare fence, or [1, fence, lease left] / [0, retry after, reason, ...]. */
export type OldAcquireReply = number | [number, number, string?, number?, string?];

/** One process of an earlier build, holding locks as `owner`, 30 s leases. */
export class OldBuildProcess {
  private readonly scripts: ReturnType<typeof scriptsOf>;

  constructor(
    private readonly redis: RedisClient,
    readonly owner: string,
    private readonly build: OldBuild = 'layout-before-version',
    private readonly leaseMs = 30_000,
  ) {
    this.scripts = scriptsOf(build);
  }

  private run(lua: string, keys: LockKeys, ...args: (string | number)[]): Promise<unknown> {
    return this.redis.eval(lua, 3, keys.state, keys.leases, keys.queue, ...args);
  }

  acquireRead(keys: LockKeys, holdId: string): Promise<OldAcquireReply> {
    return this.run(this.scripts.acquireRead, keys, this.owner, this.leaseMs, '1', holdId) as Promise<OldAcquireReply>;
  }

  /** `waitBeatMs` > 0: queue when refused, as a waiting writer does. */
  acquireWrite(keys: LockKeys, holdId: string, waitBeatMs = 0): Promise<OldAcquireReply> {
    return this.run(this.scripts.acquireWrite, keys, this.owner, this.leaseMs, waitBeatMs, '0h', holdId) as Promise<OldAcquireReply>;
  }

  /** The holds of `mode` left, or -1 when it held none. */
  release(keys: LockKeys, mode: 'read' | 'write', holdId: string): Promise<number> {
    return this.run(this.scripts.release, keys, this.owner, mode, holdId) as Promise<number>;
  }

  /** The lease left in ms, or 0 when lost. (Layout 1's renewal takes its server-time budget first.) */
  async extend(keys: LockKeys): Promise<number> {
    const lease = [keys.state, keys.leases, keys.queue, this.owner, this.leaseMs];
    const args = this.build === 'layout-1' ? [250, ...lease] : lease;
    const [left] = (await this.run(this.scripts.extend, keys, ...args)) as number[];
    return left!;
  }
}
