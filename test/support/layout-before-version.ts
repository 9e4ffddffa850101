/**
 * The hash-mode lock scripts of the storage layout from before the layout
 * version existed: lua/ at commit 168a3c6 (the last to change it before the
 * version came), kept verbatim in test/fixtures/layout-before-version/.
 * A process of such a build sends these during a rolling deploy; their KEYS
 * and ARGV are today's (lua/acquire-write.lua and the others).
 */
import { readFileSync } from 'node:fs';
import type { LockKeys } from '../../src/keys/keys.js';
import type { RedisClient } from '../../src/redis.js';

const FIXTURE = new URL('../fixtures/layout-before-version/lua/', import.meta.url);

/** A script with its `-- @include`s pasted in, as scripts/gen-lua.mjs does. */
function expand(text: string): string {
  return text.replace(/^-- @include (\S+)$/gm, (_, name: string) => expand(readFileSync(new URL(`includes/${name}.lua`, FIXTURE), 'utf8')));
}

const script = (name: string) => expand(readFileSync(new URL(`${name}.lua`, FIXTURE), 'utf8'));
const SCRIPTS = {
  acquireRead: script('acquire-read'),
  acquireWrite: script('acquire-write'),
  release: script('release'),
  extend: script('extend'),
};

/** An acquire's reply: the bare fence, or [1, fence, lease left] / [0, retry after, reason, ...]. */
export type OldAcquireReply = number | [number, number, string?, number?, string?];

/** One process of the build before the layout version, holding locks as `owner`, 30 s leases. */
export class BeforeVersionProcess {
  constructor(
    private readonly redis: RedisClient,
    readonly owner: string,
    private readonly leaseMs = 30_000,
  ) {}

  private run(lua: string, keys: LockKeys, ...args: (string | number)[]): Promise<unknown> {
    return this.redis.eval(lua, 3, keys.state, keys.leases, keys.queue, ...args);
  }

  acquireRead(keys: LockKeys, holdId: string): Promise<OldAcquireReply> {
    return this.run(SCRIPTS.acquireRead, keys, this.owner, this.leaseMs, '1', holdId) as Promise<OldAcquireReply>;
  }

  /** `waitBeatMs` > 0: queue when refused, as a waiting writer does. */
  acquireWrite(keys: LockKeys, holdId: string, waitBeatMs = 0): Promise<OldAcquireReply> {
    return this.run(SCRIPTS.acquireWrite, keys, this.owner, this.leaseMs, waitBeatMs, '0h', holdId) as Promise<OldAcquireReply>;
  }

  /** The holds of `mode` left, or -1 when it held none. */
  release(keys: LockKeys, mode: 'read' | 'write', holdId: string): Promise<number> {
    return this.run(SCRIPTS.release, keys, this.owner, mode, holdId) as Promise<number>;
  }

  /** The lease left in ms, or 0 when lost. */
  async extend(keys: LockKeys): Promise<number> {
    const [left] = (await this.run(SCRIPTS.extend, keys, keys.state, keys.leases, keys.queue, this.owner, this.leaseMs)) as number[];
    return left!;
  }
}
