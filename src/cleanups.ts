/**
 * Clean-ups that outlive the call that started them: a grant that came after
 * its acquire gave up is given back, a writer that stopped waiting leaves the
 * queue. The caller does not wait for them (an aborted acquire returns at
 * once), but `LockClient.close()` does, bounded, so that a process that
 * closes and quits leaves nothing locked behind it.
 */
export class Cleanups {
  private readonly pending = new Set<Promise<void>>();

  /** Runs `work` in the background; its failure is its own to report. */
  track(work: Promise<unknown>): void {
    const done: Promise<void> = work.then(ignore, ignore).finally(() => this.pending.delete(done));
    this.pending.add(done);
  }

  /** Settles once every clean-up started so far has ended. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all(this.pending);
  }
}

function ignore(): void {}
