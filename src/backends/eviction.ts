/**
 * Whether the masters of a client may evict lock keys: `maxmemory` and
 * `maxmemory_policy` from `INFO memory` on every master (managed services
 * allow `INFO` where they refuse `CONFIG GET`). Read at the client's first
 * use (the server check, `scripts.ts`), and again whenever a node may have
 * changed under it (`Driver.watchNodes`: a reconnect, a new master, a node
 * that lost its scripts), and after a read that a master could not answer
 * (busy with a script, loading, timed out, not reached): while a LockClient
 * listens, a second later, then less often. One watch per driver, shared by
 * every LockClient on it; each LockClient decides what to do
 * (`onEvictionRisk`).
 *
 * A master may evict lock keys when `maxmemory` is above 0 and its policy
 * is anything but `noeviction`: `allkeys-*` policies take any key, and
 * `volatile-*` ones keys with a TTL, which every lock key has. A policy this
 * module does not know counts as one that evicts.
 */
import { type Driver, type MasterReply, refusedForGood } from '../clients/driver.js';
import { EVICTION_REMEDY, type EvictionRisk, EvictionRiskError, evictionRiskText, type RWLockErrorContext } from '../errors.js';

/** How long the first read waits for the masters before it is judged without those that did not answer (they count once they do). */
const FIRST_READ_MS = 1_000;
/** How long after a read that a master could not answer every master is read again: doubling from the first, up to the second. */
const RETRY_FIRST_MS = 1_000;
const RETRY_MAX_MS = 10_000;

type Listener = (risk: EvictionRisk) => void;

/** What `INFO memory` of `node` says of its eviction: the risk, or null where it cannot evict lock keys (or does not say). */
function riskIn(node: string, reply: unknown): EvictionRisk | null {
  const info = typeof reply === 'string' ? reply : String(reply);
  const maxmemoryBytes = Number(/^maxmemory:(\d+)\s*$/m.exec(info)?.[1] ?? 0);
  const policy = /^maxmemory_policy:(\S+)\s*$/m.exec(info)?.[1];
  return policy === undefined || policy === 'noeviction' || !(maxmemoryBytes > 0) ? null : { node, policy, maxmemoryBytes };
}

/** One client's masters as their last `INFO memory` said. */
class MemoryWatch {
  /** Each master's last answer: its risk, or null. A master that did not answer keeps what it said before. */
  private readonly nodes = new Map<string, EvictionRisk | null>();
  private readonly listeners = new Set<Listener>();
  /** The first read, waited for at most {@link FIRST_READ_MS} once begun; undefined before the client's first use. */
  first: Promise<void> | undefined;
  /** Set once {@link first} settled: the watch's risks are known, as far as the masters answered. */
  judged = false;
  private reading: Promise<void> | undefined;
  private again = false;
  /** Set while a master could not answer the last read: it is read again ({@link askAgain}). */
  private unanswered = false;
  private retry: NodeJS.Timeout | undefined;
  private retryMs = RETRY_FIRST_MS;

  constructor(private readonly client: Driver) {}

  /** Begins the first read after `after` settles (a Cluster client knows its masters once it answered). */
  begin(after: Promise<unknown>): void {
    const settle = () => {
      this.judged = true;
    };
    this.first = after
      .then(noop, noop)
      .then(() => {
        this.client.watchNodes((node) => {
          if (node === undefined || !this.nodes.has(node)) this.refresh();
        });
        return boundedRead(this.refresh());
      })
      .then(settle, settle);
  }

  risks(): EvictionRisk[] {
    return [...this.nodes.values()].filter((risk) => risk !== null);
  }

  riskOf(node: string): EvictionRisk | undefined {
    return this.nodes.get(node) ?? undefined;
  }

  /** Tells `listener` of each risk found from now, and of those known already (on the next tick, after its caller's own listeners are on). */
  listen(listener: Listener): () => void {
    this.listeners.add(listener);
    for (const risk of this.risks()) this.tell(risk, [listener]);
    if (this.unanswered) this.askAgain();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size > 0) return;
      clearTimeout(this.retry); // nobody left to tell
      this.retry = undefined;
    };
  }

  /** Reads every master again: one read at a time, and one more after it for whatever asked meanwhile. */
  refresh(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    const reading = (this.reading = this.read().finally(() => {
      this.reading = undefined;
      if (this.again) {
        this.again = false;
        void this.refresh();
      }
    }));
    return reading;
  }

  private async read(): Promise<void> {
    const replies: MasterReply[] = await this.client.everyMaster(['INFO', 'memory']).catch(() => []);
    if (replies.length === 0) return; // no master known yet (a Cluster's slot map): a later change reads again
    const masters = new Set(replies.map((r) => r.node));
    for (const node of [...this.nodes.keys()]) if (!masters.has(node)) this.nodes.delete(node); // a master no longer
    for (const r of replies) if ('reply' in r) this.update(r.node, riskIn(r.node, r.reply));
    // A master that refuses INFO (an ACL without it, a proxy) cannot tell, and is not asked again.
    this.unanswered = replies.some((r) => 'error' in r && !refusedForGood(this.client, r.error));
    if (this.unanswered) this.askAgain();
    else this.retryMs = RETRY_FIRST_MS;
  }

  /** Reads every master again after {@link retryMs}, doubled for the next time, while a LockClient listens and the client is open. */
  private askAgain(): void {
    if (this.retry !== undefined || this.listeners.size === 0 || this.client.closed) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(2 * delay, RETRY_MAX_MS);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.refresh();
    }, delay).unref();
  }

  private update(node: string, risk: EvictionRisk | null): void {
    const before = this.nodes.get(node);
    this.nodes.set(node, risk);
    if (risk === null) {
      warned.delete(node); // a policy that evicts again later is warned of again
      return;
    }
    if (before?.policy === risk.policy) return;
    this.tell(risk, this.listeners);
  }

  /**
   * Tells each of `listeners` still listening of `risk`, each on a tick of
   * its own, once the read that found it has recorded every master: a
   * listener that throws (a LockClient's `evictionRisk` listener) throws to
   * the process, as one of any background event does, and keeps neither the
   * other LockClients from hearing nor this watch from going on.
   */
  private tell(risk: EvictionRisk, listeners: Iterable<Listener>): void {
    for (const listener of [...listeners]) process.nextTick(() => this.listeners.has(listener) && listener(risk));
  }
}

function noop(): void {}

/** `read`, waited for at most {@link FIRST_READ_MS}: a master that answers later counts once it does. */
function boundedRead(read: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([read, new Promise<void>((resolve) => (timer = setTimeout(resolve, FIRST_READ_MS).unref()))]).finally(() =>
    clearTimeout(timer),
  );
}

const watches = new WeakMap<Driver, MemoryWatch>();

function watchOf(client: Driver): MemoryWatch {
  let watch = watches.get(client);
  if (!watch) watches.set(client, (watch = new MemoryWatch(client)));
  return watch;
}

/**
 * The server check's reading of `client`'s masters' memory policy: begins
 * once per client, after `after` (the check's first command) settles, and
 * goes on by itself whenever a node may have changed. Nothing waits for it
 * but a refusal (`onEvictionRisk: 'refuse'`, {@link refuseIfEvicting}).
 */
export function checkMemory(client: Driver, after: Promise<unknown>): void {
  const watch = watchOf(client);
  if (watch.first === undefined) watch.begin(after);
}

/** The masters of `client` that may evict lock keys, as they last said. */
export function evictionRisks(client: Driver): EvictionRisk[] {
  return watches.get(client)?.risks() ?? [];
}

/** The risk of the master that serves `slot` (one server: the server), if it may evict lock keys. */
export function evictionRiskOf(client: Driver, slot: number): EvictionRisk | undefined {
  const watch = watches.get(client);
  if (!watch) return undefined;
  if (!client.cluster) return watch.risks()[0];
  const node = client.masterOf(slot);
  return node === undefined ? undefined : watch.riskOf(node);
}

/**
 * The masters of `client` that may evict lock keys, once its first read of
 * them is done (waited for at most a second; begun now if no call began it,
 * on a client that is connected and knows its masters). `again`: read them
 * again first, if that first read was done, waited for as long (the CLI's
 * `top`, each refresh).
 */
export async function evictionChecked(client: Driver, again = false): Promise<EvictionRisk[]> {
  const watch = watchOf(client);
  if (watch.first === undefined) watch.begin(Promise.resolve());
  else if (again && watch.judged) await boundedRead(watch.refresh());
  await watch.first;
  return watch.risks();
}

/**
 * Tells `listener` of every master of `client` found to have a policy that
 * may evict lock keys: once per master and policy (again when its policy
 * changes), and at once of those already known. Returns the unsubscribe.
 */
export function onEvictionRisk(client: Driver, listener: Listener): () => void {
  return watchOf(client).listen(listener);
}

/**
 * `onEvictionRisk: 'refuse'`: throws {@link EvictionRiskError} when a master
 * of `client` may evict lock keys; undefined when none may, as far as the
 * masters said; a promise of the same while the first read runs (begun by
 * the server check).
 */
export function refuseIfEvicting(client: Driver, context: RWLockErrorContext): Promise<void> | undefined {
  const watch = watches.get(client);
  if (watch?.first === undefined) return undefined;
  if (!watch.judged) return watch.first.then(() => refuseIfEvicting(client, context));
  const refusal = evictionRefusal(client, context);
  if (refusal) throw refusal;
  return undefined;
}

/**
 * {@link refuseIfEvicting}'s refusal as the masters of `client` last said,
 * at once: for a grant a release handed a queued writer, which waits for
 * nothing (its tries waited for the first read).
 */
export function evictionRefusal(client: Driver, context: RWLockErrorContext): EvictionRiskError | undefined {
  const [risk] = watches.get(client)?.risks() ?? [];
  return risk && new EvictionRiskError(risk, context);
}

/** Each master warned of in this process, with the policy it was warned of. */
const warned = new Map<string, string>();

/** The `code` of the process warning (and of {@link EvictionRiskError}). */
export const EVICTION_WARNING_CODE = 'RWLOCK_EVICTION_RISK';

/**
 * Warns the process (`process.emitWarning`, printed on stderr unless the
 * process says otherwise) of `risk`: once per master and policy, whichever
 * LockClients find it; a master whose policy changes to another that evicts,
 * or that stopped evicting and starts again, is warned of again.
 */
export function warnOfEviction(risk: EvictionRisk): void {
  if (warned.get(risk.node) === risk.policy) return;
  warned.set(risk.node, risk.policy);
  process.emitWarning(`redis-rwlock: ${evictionRiskText(risk)}`, {
    type: 'RWLockEvictionWarning',
    code: EVICTION_WARNING_CODE,
    detail:
      `To be safe, ${EVICTION_REMEDY} (docs/production.md, "Eviction"). ` +
      (risk.policy.startsWith('volatile-')
        ? 'Fenced writes (fencedSet) stay safe meanwhile: their fence keys carry no TTL. '
        : 'Under this policy even the fence keys of fenced writes (fencedSet) may be evicted. ') +
      "The LockClient option onEvictionRisk: 'refuse' refuses to acquire there instead; 'ignore' silences this warning.",
  });
}

/** Forgets the masters warned of, so that a test can see the warning again. @internal */
export function forgetEvictionWarnings(): void {
  warned.clear();
}
