/**
 * What `LockClient.close()` waits for: the acquires still in flight, and the
 * clean-ups that outlive the call that started them (a grant that came after
 * its acquire gave up is given back, a writer that stopped waiting leaves the
 * queue). The caller does not wait for a clean-up (an aborted acquire returns
 * at once), but `close()` does, bounded, so that a process that closes and
 * quits leaves nothing locked behind it.
 */
export class Cleanups {
  private readonly pending = new Set<Promise<void>>();
  /** Acquires between their first try and their settling. */
  private acquiring = 0;
  /** Resolved when `acquiring` drops to 0 (only while someone waits for it). */
  private idle: (() => void) | undefined;
  private idleWait: Promise<void> | undefined;
  /** Set once `close()` has settled: an optional clean-up not sent yet is dropped. */
  private stopped = false;
  /** The queues of optional clean-ups (`paced.ts`), emptied of them once `close()` has settled. */
  private readonly queues = new Set<{ dropOptional(): void }>();

  /** An acquire starts: `close()` waits until it has settled (and tracked its clean-up). */
  acquireStarted(): void {
    this.acquiring++;
  }

  acquireEnded(): void {
    if (--this.acquiring === 0 && this.idle) {
      this.idle();
      this.idle = this.idleWait = undefined;
    }
  }

  /** Runs `work` in the background; its failure is its own to report. */
  track(work: Promise<unknown>): void {
    const done: Promise<void> = work.then(ignore, ignore).finally(() => this.pending.delete(done));
    this.pending.add(done);
  }

  /** `close()` has settled: no optional clean-up still queued is sent, even behind calls that never answer. */
  closed(): void {
    this.stopped = true;
    for (const queue of this.queues) queue.dropOptional();
  }

  /** A queue whose optional calls {@link closed} drops. */
  register(queue: { dropOptional(): void }): void {
    this.queues.add(queue);
  }

  /** Whether an optional clean-up may still be sent (see {@link closed}). */
  get sending(): boolean {
    return !this.stopped;
  }

  /** Settles once no acquire is in flight and every clean-up started so far has ended. */
  async settled(): Promise<void> {
    for (;;) {
      if (this.acquiring > 0) {
        this.idleWait ??= new Promise<void>((resolve) => (this.idle = resolve));
        await this.idleWait;
      } else if (this.pending.size > 0) await Promise.all(this.pending);
      else return;
    }
  }
}

function ignore(): void {}
