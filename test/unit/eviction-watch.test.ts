/**
 * When the memory watch reads the masters again after a read that one could
 * not answer, over a stub driver and fake timers: a second later, then twice
 * as long each time up to 10 s, while a LockClient listens; never for a
 * master that refuses INFO for good; not once the last listener left.
 * (The same against real servers: eviction.test.ts, "asks again a master
 * that could not answer".)
 */
import { expect } from 'chai';
import sinon from 'sinon';
import { checkMemory, evictionChecked, onEvictionRisk } from '../../src/backends/eviction.js';
import type { Driver, MasterReply } from '../../src/clients/driver.js';

const NOT_ANSWERED = Object.assign(new Error('Command timed out'), { name: 'TimeoutError' });
const REFUSED = Object.assign(new Error("NOPERM User app has no permissions to run the 'info' command"), { name: 'ReplyError' });
const BUSY = Object.assign(new Error('BUSY Redis is busy running a script.'), { name: 'ReplyError' });
const EVICTS = '# Memory\r\nmaxmemory:104857600\r\nmaxmemory_policy:allkeys-lru\r\n';

/** A one-server driver whose INFO memory answers as `answer` says at each read; counts the reads. */
function stubDriver(answer: (read: number) => { reply: unknown } | { error: unknown }) {
  let reads = 0;
  const driver = {
    cluster: false,
    closed: false,
    everyMaster: (): Promise<MasterReply[]> => Promise.resolve([{ node: '127.0.0.1:6379', ...answer(++reads) }]),
    watchNodes: () => undefined,
    isReplyError: (error: unknown) => error instanceof Error && error.name === 'ReplyError',
  } as unknown as Driver;
  return { driver, reads: () => reads };
}

/** Lets the reads that timers began settle. */
const settled = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe('eviction watch: reading a master again', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => (clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })));
  afterEach(() => clock.restore());

  /** The first read of `driver` (begun as the server check begins it), with a listener on. */
  async function firstRead(driver: Driver): Promise<{ heard: unknown[]; unlisten: () => void }> {
    const heard: unknown[] = [];
    const unlisten = onEvictionRisk(driver, (risk) => heard.push(risk));
    checkMemory(driver, Promise.resolve());
    await evictionChecked(driver);
    return { heard, unlisten };
  }

  /** The reads made by each of `atMs` (ms from now), as the clock reaches it. */
  async function readsBy(reads: () => number, atMs: readonly number[]): Promise<number[]> {
    const seen: number[] = [];
    let now = 0;
    for (const at of atMs) {
      await clock.tickAsync(at - now);
      now = at;
      await settled();
      seen.push(reads());
    }
    return seen;
  }

  for (const [what, error] of [
    ['not answered', NOT_ANSWERED],
    ['busy', BUSY],
  ] as const) {
    it(`a master ${what}: read again 1 s later, then 2, 4, 8 and every 10 s, until it answers; then no more`, async () => {
      const { driver, reads } = stubDriver((read) => (read < 7 ? { error } : { reply: EVICTS }));
      const { heard } = await firstRead(driver);
      expect(reads()).to.equal(1);
      // Reads 2 to 7 at 1, 3, 7, 15, 25 and 35 s; the 7th answers.
      expect(await readsBy(reads, [999, 1_000, 2_999, 3_000, 7_000, 15_000, 25_000, 35_000, 120_000])).to.deep.equal([
        1, 2, 2, 3, 4, 5, 6, 7, 7,
      ]);
      expect(heard).to.have.length(1);
    });
  }

  it('a master that refuses INFO (an ACL without it) cannot tell, and is not asked again', async () => {
    const { driver, reads } = stubDriver(() => ({ error: REFUSED }));
    await firstRead(driver);
    expect(await readsBy(reads, [60_000])).to.deep.equal([1]);
  });

  it('no reads once the last listener left (every LockClient closed); the next listener asks again', async () => {
    const { driver, reads } = stubDriver(() => ({ error: NOT_ANSWERED }));
    const { unlisten } = await firstRead(driver);
    unlisten();
    expect(await readsBy(reads, [60_000])).to.deep.equal([1]);
    const unlistenAgain = onEvictionRisk(driver, () => undefined);
    expect(await readsBy(reads, [1_999, 2_000])).to.deep.equal([1, 2]); // the wait it had reached
    unlistenAgain();
  });
});
