import { createHash } from 'node:crypto';
import type { ScriptName } from '../backends/scripts.js';
import { LUA_SOURCES } from '../lua/scripts.generated.js';

let shas: Record<ScriptName, string> | undefined;

/** Each library script's SHA-1, as `EVALSHA` names it (hashed on first use). */
export function shaOf(name: ScriptName): string {
  shas ??= Object.fromEntries(
    Object.entries(LUA_SOURCES).map(([n, source]) => [n, createHash('sha1').update(source).digest('hex')]),
  ) as Record<ScriptName, string>;
  return shas[name];
}

/** Sends one script call: `EVAL` with the script's text when `asEval`, else `EVALSHA`. */
export type ScriptSend = (asEval: boolean) => Promise<unknown>;

/** How many loads of one script a call waits for before it sends the script itself. */
const MAX_WAITS = 3;

/** Whether `error` is the server's NOSCRIPT reply (every driver keeps the server's code first). */
const isNoScript = (error: unknown): boolean => error instanceof Error && error.message.startsWith('NOSCRIPT');

/**
 * The library's scripts on one node (a server, a Cluster master) as one
 * client sends them: each goes in full (`EVAL`) once, every other call as
 * `EVALSHA`. A node that lost its scripts (SCRIPT FLUSH, a restart, a
 * replica promoted) answers NOSCRIPT to every call in flight: the first
 * call to meet it is sent again as `EVAL`, which loads the script, and the
 * others wait for that one answer and are sent again as `EVALSHA`. 10,000
 * calls each sending a 10 KB script kept the server busy past their bounds.
 * The load is the call's own `EVAL` rather than `SCRIPT LOAD`, which the
 * documented ACL users may not run.
 */
export class NodeScripts {
  private readonly sent = new Set<ScriptName>();
  /** The `EVAL` of each script in flight; settles once the server answered it (its reply ignored), rejects if it was not reached. */
  private readonly loads = new Map<ScriptName, Promise<void>>();

  /** `lost`: called when the node answers NOSCRIPT to a script it had (it may be another server now: `Driver.watchNodes`). */
  constructor(private readonly lost: () => void = () => undefined) {}

  /**
   * Runs script `name` by `send`; `answered(error)` tells the server's
   * error replies (a script's own error loaded it all the same) from a
   * failure to reach it, which fails the calls that waited for this load.
   */
  run(name: ScriptName, send: ScriptSend, answered: (error: unknown) => boolean): Promise<unknown> {
    if (!this.sent.has(name)) {
      // The node's first: the calls that follow it on the connection find the script loaded.
      this.sent.add(name);
      return this.load(name, send, answered);
    }
    return send(false).catch((error: unknown) => this.reloaded(error, name, send, answered));
  }

  /**
   * After `error`: NOSCRIPT waits for the script's one load, and is sent
   * again; NOSCRIPT again (the node lost its scripts again meanwhile: a
   * second SCRIPT FLUSH, a restart) waits for that loss's one load too, up to
   * {@link MAX_WAITS} loads, after which the call loads the script itself.
   * Sending every such call as EVAL at once sent 4,900 of 5,000 in full.
   */
  private reloaded(error: unknown, name: ScriptName, send: ScriptSend, answered: (error: unknown) => boolean, waits = 0): Promise<unknown> {
    if (!isNoScript(error)) throw error;
    const loading = this.loads.get(name);
    if (loading === undefined) {
      this.lost();
      return this.load(name, send, answered);
    }
    if (waits >= MAX_WAITS) return send(true);
    return loading.then(() => send(false).catch((again: unknown) => this.reloaded(again, name, send, answered, waits + 1)));
  }

  private load(name: ScriptName, send: ScriptSend, answered: (error: unknown) => boolean): Promise<unknown> {
    const call = send(true);
    const loaded = call.then(
      () => undefined,
      (error: unknown) => {
        if (!answered(error)) throw error;
      },
    );
    this.loads.set(name, loaded);
    const done = () => {
      if (this.loads.get(name) === loaded) this.loads.delete(name);
    };
    loaded.then(done, done);
    return call;
  }
}
