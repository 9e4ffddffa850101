/**
 * Renews leases with one call per group of requests (a node, or a slot), so
 * that a group that fails (its node unreachable, its slot moving) does not
 * stop the renewal of every other lease: its entries stay NaN, "not known
 * this time", and the caller tries them again next period. When every group
 * fails, the first error is thrown.
 */
export async function extendByGroup(
  count: number,
  groups: readonly number[][],
  run: (indexes: number[], results: number[]) => Promise<void>,
): Promise<number[]> {
  const results = new Array<number>(count).fill(NaN);
  const settled = await Promise.allSettled(groups.map((indexes) => run(indexes, results)));
  const failed = settled.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed.length > 0 && failed.length === settled.length) throw failed[0]!.reason;
  return results;
}
