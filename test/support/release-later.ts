/**
 * Calls `release` once `ms` have passed, and says when it did. A waiter's
 * grant is timed from that moment, not from the line after the timer was
 * set: a busy machine can stop this process between the two for longer
 * than it takes the waiter to be woken, and then a grant right after the
 * release looks early.
 */
export function releaseLater(ms: number, release: () => unknown): { readonly sentAt: () => number } {
  let sentAt: number | undefined;
  setTimeout(() => {
    sentAt = performance.now();
    void release();
  }, ms);
  return {
    sentAt: () => {
      if (sentAt === undefined) throw new Error('the waiter was granted before the holder released');
      return sentAt;
    },
  };
}
