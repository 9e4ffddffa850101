// The fault suites' "time to recover" (longestHandoffMs): how long a lock
// stood free by every process's account while an earlier request still
// waited. A hold the server counted twice shows as such a gap; a writer
// that came later and went first (writer preference), or a stalled network,
// does not.
import { expect } from 'chai';
import { type History, type Hold, longestHandoffMs } from '../support/history.js';

let serial = 0;
function hold(resource: string, requestedAt: number, grantedAt: number, releasedAt: number): Hold {
  serial++;
  return {
    id: `p:${serial}`,
    process: 'p',
    resource,
    mode: 'write',
    owner: `p:${serial}`,
    fence: serial,
    requestedAt,
    grantedAt,
    releaseAt: releasedAt,
    releasedAt,
    release: 'ok',
  };
}

function history(holds: Hold[]): History {
  return { holds, failures: [], deaths: new Map(), shutdowns: new Map(), hangs: [], pauses: new Map(), done: new Map() };
}

describe('longestHandoffMs', () => {
  it('counts the time a released lock stood free while an earlier request waited', () => {
    // Released at 100; a waiter asked at 50 and got it at 1,900: free for 1,800 ms, as after a hold counted twice.
    expect(longestHandoffMs(history([hold('a', 0, 0, 100), hold('a', 50, 1_900, 2_000)]))).to.equal(1_800);
  });

  it('shows a hold counted twice: the rest of its lease after the real hold ends', () => {
    // A grant counted twice at 0 (2 s lease), the real hold released at 8: free until 2,000 while a waiter asked at 5.
    const holds = [hold('a', 0, 0, 8), hold('a', 5, 2_000, 2_010)];
    expect(longestHandoffMs(history(holds))).to.equal(1_992);
  });

  it('leaves out the time other holds covered: later writers that went first are no stuck lock', () => {
    const holds = [hold('a', 0, 0, 100), hold('a', 110, 120, 900), hold('a', 800, 850, 1_500), hold('a', 50, 1_600, 1_700)];
    // The first waiter's wait, 100-1,600, stood free 100-120 and 1,500-1,600 only.
    expect(longestHandoffMs(history(holds))).to.equal(120);
  });

  it('leaves out the pauses given (a stalled network), and holds of other locks count for nothing', () => {
    const holds = [hold('a', 0, 0, 100), hold('b', 0, 100, 1_000), hold('a', 50, 1_100, 1_200)];
    expect(longestHandoffMs(history(holds))).to.equal(1_000);
    expect(longestHandoffMs(history(holds), [{ kind: 'other', start: 200, end: 900 }])).to.equal(300);
  });

  it('counts no wait for a request made after the release', () => {
    expect(longestHandoffMs(history([hold('a', 0, 0, 100), hold('a', 1_000, 1_000, 1_100)]))).to.equal(0);
  });
});
