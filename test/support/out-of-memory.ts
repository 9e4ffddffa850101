import calculateSlot from 'cluster-key-slot';
import type { Redis } from 'ioredis';

/** A hash tag of a slot `node` owns (its first slot range), for keys a Cluster node takes. */
async function tagOf(node: Redis): Promise<string> {
  if (!/^cluster_enabled:1\s*$/m.test(await node.info('cluster'))) return '{oom}';
  const port = node.options.port;
  const ranges = await node.cluster('SLOTS');
  const own = ranges.find((range) => range[2]?.[1] === port);
  if (own === undefined) throw new Error(`node ${port} owns no slot`);
  for (let i = 0; ; i++) {
    const slot = calculateSlot(`oom:${i}`);
    if (slot >= own[0] && slot <= own[1]) return `{oom:${i}}`;
  }
}

const usedMemory = async (node: Redis) => Number(/^used_memory:(\d+)/m.exec(await node.info('memory'))![1]);

/**
 * Puts every one of `nodes` (masters) out of memory, as a cache Redis at its
 * `maxmemory` with `noeviction` is: a filler key of 1 MiB, then `maxmemory`
 * 256 KiB below what the server uses, so that nothing a client's buffers
 * give back brings it under. Resolves with the undo (`maxmemory` 0, the
 * filler deleted), which a test runs in `finally`.
 */
export async function outOfMemory(nodes: readonly Redis[]): Promise<() => Promise<void>> {
  const tags = await Promise.all(nodes.map(tagOf));
  const fillers = tags.map((tag) => `${tag}:filler`);
  const restore = async () => {
    await Promise.all(
      nodes.map(async (node, i) => {
        await node.config('SET', 'maxmemory', '0');
        await node.del(fillers[i]!);
      }),
    );
  };
  try {
    await Promise.all(
      nodes.map(async (node, i) => {
        await node.config('SET', 'maxmemory-policy', 'noeviction');
        await node.setrange(fillers[i]!, 1024 * 1024, 'x');
        await node.config('SET', 'maxmemory', String((await usedMemory(node)) - 256 * 1024));
      }),
    );
    // Out of memory on every node: a write that may grow memory is refused there.
    for (const [i, node] of nodes.entries()) {
      const refused = await node.set(`${tags[i]}:probe`, '1').then(
        () => false,
        (error: Error) => error.message.startsWith('OOM'),
      );
      if (!refused) throw new Error(`node ${node.options.port} is not out of memory`);
    }
  } catch (error) {
    await restore();
    throw error;
  }
  return restore;
}
