/**
 * Runs scripts of the model's build (virtual-clock.ts) on a real server from
 * a given state: one pipeline writes the state's keys and the clock, runs
 * the calls, and reads every key back after each, with what they published.
 */
import type { Redis } from 'ioredis';
import type { LuaScriptName } from '../../src/lua/scripts.generated.js';
import { NOW_KEY, OFFSET_MS, PUBLISHED_KEY, TICK_KEY } from './virtual-clock.js';
import type { KeyKind, Keys, KeyValue, World } from './world.js';

export interface ScriptCall {
  readonly script: LuaScriptName;
  readonly keys: readonly string[];
  readonly args: readonly (string | number)[];
}

export interface Ran {
  /** Each call's reply, or its error. */
  replies: (unknown | Error)[];
  /** The keys after each call. */
  after: Keys[];
  /** What the calls published, as [channel, message]. */
  published: [string, string][];
  /** The clock's tick after the calls. */
  tick: number;
}

export class Executor {
  private readonly shas = new Map<string, string>();

  constructor(
    private readonly redis: Redis,
    private readonly scripts: Readonly<Record<string, string>>,
    private readonly kinds: ReadonlyMap<string, KeyKind>,
  ) {}

  async load(): Promise<void> {
    for (const [name, source] of Object.entries(this.scripts)) {
      this.shas.set(name, (await this.redis.script('LOAD', source)) as string);
    }
  }

  async run(w: World, calls: readonly ScriptCall[]): Promise<Ran> {
    const p = this.redis.pipeline();
    p.del(...this.kinds.keys(), PUBLISHED_KEY);
    p.set(NOW_KEY, w.now);
    p.set(TICK_KEY, w.tick);
    for (const [name, kv] of Object.entries(w.keys)) {
      if (kv.t === 'hash') p.hset(name, ...kv.v.flat());
      else if (kv.t === 'zset') p.zadd(name, ...kv.v.flatMap(([m, s]) => [s, m]));
      else p.set(name, kv.v);
      if (kv.at !== null) p.pexpireat(name, kv.at + OFFSET_MS);
    }
    const prefix = 3 + Object.values(w.keys).reduce((n, kv) => n + (kv.at === null ? 1 : 2), 0);
    const names = [...this.kinds.keys()];
    for (const c of calls) {
      p.evalsha(this.shas.get(c.script)!, c.keys.length, ...c.keys, ...c.args.map(String));
      for (const name of names) {
        const kind = this.kinds.get(name)!;
        if (kind === 'hash') p.hgetall(name);
        else if (kind === 'zsetMs' || kind === 'zsetUs') p.zrange(name, '0', '-1', 'WITHSCORES');
        else p.get(name);
        p.pexpiretime(name);
      }
    }
    p.lrange(PUBLISHED_KEY, 0, -1);
    p.get(TICK_KEY);
    const results = (await p.exec())!;
    for (const [error] of results.slice(0, prefix)) if (error) throw error;
    const replies: (unknown | Error)[] = [];
    const after: Keys[] = [];
    let at = prefix;
    for (let i = 0; i < calls.length; i++) {
      const [error, reply] = results[at++]!;
      replies.push(error ?? reply);
      const keys: Keys = {};
      for (const name of names) {
        const [, value] = results[at++]!;
        const [, expiry] = results[at++]!;
        const kv = readKey(this.kinds.get(name)!, value, expiry as number);
        if (kv) keys[name] = kv;
      }
      after.push(keys);
    }
    const flat = results[at++]![1] as string[];
    const published: [string, string][] = [];
    for (let i = 0; i < flat.length; i += 2) published.push([flat[i]!, flat[i + 1]!]);
    return { replies, after, published, tick: Number(results[at]![1]) };
  }
}

function readKey(kind: KeyKind, value: unknown, expiry: number): KeyValue | undefined {
  if (expiry === -2) return undefined;
  const at = expiry === -1 ? null : expiry - OFFSET_MS;
  if (kind === 'hash') {
    const v = Object.entries(value as Record<string, string>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return { t: 'hash', v, at };
  }
  if (kind === 'zsetMs' || kind === 'zsetUs') {
    const flat = value as string[];
    const v: [string, number][] = [];
    for (let i = 0; i < flat.length; i += 2) v.push([flat[i]!, Number(flat[i + 1])]);
    return { t: 'zset', v, at };
  }
  return { t: 'string', v: value as string, at };
}
