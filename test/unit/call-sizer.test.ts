import { expect } from 'chai';
import { CallSizer } from '../../src/backends/call-sizer.js';

/**
 * Calls on a server whose clock stands still in a script, run one after the
 * other: each call's start is the last one's plus what it cost, plus
 * `between(i)` µs of other clients' commands.
 */
function standStill(sizer: CallSizer, costUs: number, calls: number, between: (i: number) => number): number[] {
  let serverUs = 5_000_000;
  const sizes: number[] = [];
  for (let i = 0; i < calls; i++) {
    const units = sizer.size;
    sizes.push(units);
    sizer.answered({ startUs: serverUs, elapsedUs: 0, units, sent: units, stopped: false });
    serverUs += units * costUs + between(i);
  }
  return sizes;
}

describe('CallSizer', () => {
  it('where the clock moves, follows what the budget reached, and grows while calls do all they carry', () => {
    const sizer = new CallSizer(250, 16, 256);
    sizer.answered({ startUs: 1, elapsedUs: 260, units: 9, sent: 16, stopped: true });
    expect(sizer.size).to.equal(9);
    sizer.answered({ startUs: 2, elapsedUs: 200, units: 9, sent: 9, stopped: false });
    expect(sizer.size).to.equal(12);
    for (let i = 0; i < 40; i++) sizer.answered({ startUs: 3 + i, elapsedUs: 100, units: sizer.size, sent: sizer.size, stopped: false });
    expect(sizer.size).to.equal(256);
  });

  it('where the clock moves, halves its size at most after one call a stall stopped early', () => {
    const sizer = new CallSizer(250, 16, 256);
    for (let i = 0; i < 40; i++) sizer.answered({ startUs: i, elapsedUs: 100, units: sizer.size, sent: sizer.size, stopped: false });
    expect(sizer.size).to.equal(256);
    // The server was descheduled mid-call: the budget ran out after one lease.
    sizer.answered({ startUs: 50, elapsedUs: 300, units: 1, sent: 256, stopped: true });
    expect(sizer.size).to.equal(128);
    sizer.answered({ startUs: 51, elapsedUs: 120, units: 128, sent: 128, stopped: false });
    expect(sizer.size).to.equal(160);
  });

  it('where the clock stands still, keeps each call within the budget by its measured cost', () => {
    const sizes = standStill(new CallSizer(250, 16, 256), 20, 50, () => 0);
    expect(sizes[0]).to.equal(16);
    expect(sizes.slice(2).every((n) => n * 20 <= 250)).to.equal(true);
    expect(sizes.at(-1)).to.equal(12);
  });

  it('does not shrink to nothing when other commands run between its calls', () => {
    // Every call but one in four has a 250 µs command of another client before the next.
    const sizes = standStill(new CallSizer(250, 16, 256), 20, 200, (i) => (i % 4 === 0 ? 0 : 250));
    expect(sizes.slice(2).every((n) => n * 20 <= 250)).to.equal(true);
    expect(Math.min(...sizes.slice(100))).to.equal(12);
  });

  it('learns a higher cost once the lower ones it keeps have left', () => {
    const sizer = new CallSizer(250, 16, 256);
    standStill(sizer, 20, 20, () => 0);
    expect(sizer.size).to.equal(12);
    // The leases got costlier: 50 µs each. The least of the recent costs is the estimate, so
    // the calls stay at 12 (600 µs, inside the 1 ms the budget guards) until the old costs leave.
    const sizes = standStill(sizer, 50, 20, () => 0);
    expect(sizes.filter((n) => n * 50 > 250).length).to.be.at.most(9);
    expect(sizes.at(-1)).to.equal(5);
  });
});
