/**
 * Release calls in flight at once when many go out together (`close()`, a
 * group's release, the give-backs of leases a stall lost together). Sent all at once, 100,000 releases queue ahead of every
 * other client's commands on the server; a few at a time, the others'
 * commands go in between, each waiting for at most these few (a release
 * runs for some 20-50 µs of server time).
 */
export const RELEASE_CALLS_IN_FLIGHT = 16;

/**
 * Runs `call` on each of `items` in order, at most `inFlight` at once: the
 * next goes out as one settles. Sends no more once `more()` says no. Settles
 * when every call sent has settled, with each item's outcome, as
 * `Promise.allSettled` does (undefined for an item not sent).
 */
export async function paced<T, R>(
  items: readonly T[],
  inFlight: number,
  call: (item: T) => Promise<R>,
  more: () => boolean = () => true,
): Promise<(PromiseSettledResult<R> | undefined)[]> {
  const outcomes = new Array<PromiseSettledResult<R> | undefined>(items.length).fill(undefined);
  let next = 0;
  const send = async (): Promise<void> => {
    while (next < items.length && more()) {
      const i = next++;
      try {
        outcomes[i] = { status: 'fulfilled', value: await call(items[i]!) };
      } catch (reason) {
        outcomes[i] = { status: 'rejected', reason };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, items.length) }, send));
  return outcomes;
}
