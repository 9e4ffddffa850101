// GLIDE Cluster's wake-up subscriber bounds each SSUBSCRIBE itself (GLIDE's
// timeout, 2 s by default), so that a subscription the server never confirms
// (most often an ACL without the channel) fails with GLIDE's answer and its
// likely cause, on the client already made. The hub's own subscribe bound
// (4 × linkCheckMs) must not fire first: it would remake the whole
// GlideClusterClient (every channel on every master lost) on each try, and
// say only that the server did not answer.
import { expect } from 'chai';
import sinon from 'sinon';
import { GlideDriver } from '../../src/clients/glide.js';
import { WakeupHub } from '../../src/wakeups.js';

/** A `GlideClusterClient` whose SSUBSCRIBE is never confirmed: GLIDE rejects it with a TimeoutError after its timeout. */
class NeverConfirmingCluster {
  static readonly made: NeverConfirmingCluster[] = [];
  static async createClient(options: Record<string, unknown>): Promise<NeverConfirmingCluster> {
    const client = new NeverConfirmingCluster(options);
    NeverConfirmingCluster.made.push(client);
    return client;
  }
  isClosed = false;
  readonly timeouts: number[] = [];
  constructor(readonly config: Record<string, unknown>) {}
  invokeScript(): never {
    throw new Error('not used');
  }
  invokeScriptWithRoute(): never {
    throw new Error('not used');
  }
  getPubSubMessage(): never {
    throw new Error('not used');
  }
  customCommand(): Promise<never> {
    return Promise.reject(new Error('no server'));
  }
  ssubscribe(_channels: Iterable<string>, timeoutMs: number): Promise<void> {
    this.timeouts.push(timeoutMs);
    return new Promise((_, reject) => setTimeout(() => reject(Object.assign(new Error('timed out'), { name: 'TimeoutError' })), timeoutMs));
  }
  sunsubscribe(): Promise<void> {
    return Promise.resolve();
  }
  sunsubscribeLazy(): Promise<void> {
    return Promise.resolve();
  }
  close(): void {
    this.isClosed = true;
  }
}

describe('GLIDE Cluster wake-up subscriber: its own SSUBSCRIBE bound comes before the hub’s', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    NeverConfirmingCluster.made.length = 0;
  });
  afterEach(() => clock.restore());

  /**
   * The errors a hub of `linkCheckMs` reports over `ms` for one waiter whose
   * subscription is never confirmed, and which of the library's subscriber
   * clients were closed by then (before the hub's close()).
   */
  async function errorsOver(linkCheckMs: number | undefined, ms: number): Promise<{ errors: string[]; closed: boolean[] }> {
    const user = new NeverConfirmingCluster({ addresses: [{ host: '127.0.0.1', port: 7000 }] });
    const driver = new GlideDriver(user as never);
    const errors: string[] = [];
    const hub = new WakeupHub(
      [driver],
      { message: () => undefined, unconfirmed: () => undefined, error: (e) => errors.push(e.message) },
      undefined,
      linkCheckMs,
    );
    const watching = hub.watch('rwlock:{a}:wake', 100);
    await clock.tickAsync(100);
    const watch = await watching;
    await clock.tickAsync(ms - 100);
    const closed = NeverConfirmingCluster.made.map((c) => c.isClosed);
    watch.close();
    hub.close();
    return { errors, closed };
  }

  for (const linkCheckMs of [50, 250, 400]) {
    it(`linkCheckMs ${linkCheckMs}: GLIDE's answer, not the hub's bound, and the subscriber client kept`, async () => {
      const { errors, closed } = await errorsOver(linkCheckMs, 40 * linkCheckMs);
      expect(errors).to.not.be.empty;
      for (const message of errors) expect(message).to.match(/^GLIDE did not confirm the subscription .* permission/);
      // One subscriber client of the library's own, kept: not closed and made again on each try.
      expect(closed).to.deep.equal([false]);
      const [own] = NeverConfirmingCluster.made;
      expect(own!.timeouts.length).to.be.above(1);
      for (const t of own!.timeouts) expect(t).to.be.below(4 * linkCheckMs);
    });
  }

  it("by default: GLIDE's timeout stays 2 s", async () => {
    const { errors, closed } = await errorsOver(undefined, 2_050);
    expect(errors).to.have.length(1);
    expect(errors[0]).to.match(/^GLIDE did not confirm the subscription to wake-up channel "rwlock:\{a\}:wake" within 2000 ms;/);
    expect(closed).to.deep.equal([false]);
    expect(NeverConfirmingCluster.made[0]!.timeouts).to.deep.equal([2_000]);
  });
});
