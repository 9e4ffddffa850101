import type { Writable } from 'node:stream';
import type { Redis } from 'ioredis';

/** Commands a connection holds back within one tick before it writes them out together. */
const COALESCE_BATCH = 16;

/** ioredis' queue of the commands a connection sent and awaits answers to (not in its typings). */
type InFlight = { readonly commandQueue?: { readonly length: number } };

/** Connections holding back writes until the end of this tick, with how many commands each holds. */
const corked = new WeakMap<Writable, number>();

/**
 * Holds back the writes on `connection` (the next command is about to be
 * written to it) until the end of this tick, or until it holds
 * {@link COALESCE_BATCH} commands. At many cycles in flight, a socket write
 * per command was most of a cycle's client CPU, and the server reads a batch
 * in one go too; a batch of 16 keeps both busy (one batch per tick made
 * client and server wait for each other). The order of writes, the user's own
 * commands on the connection among them, stays as it was.
 *
 * A call on a connection with nothing in flight goes out at once: nothing
 * would join it, and synchronous work after it in the same tick (an
 * event-loop stall) must not keep it off the wire past its bound.
 */
export function coalesceWrites(connection: Redis | undefined): void {
  const stream = connection?.stream as Writable | undefined;
  if (stream === undefined || !stream.writable) return;
  const held = corked.get(stream);
  if (held === undefined) {
    if ((connection as unknown as InFlight).commandQueue?.length === 0) return;
    stream.cork();
    process.nextTick(writeOut, stream);
  } else if (held === COALESCE_BATCH) {
    // A full batch goes now; this command starts the next.
    stream.uncork();
    stream.cork();
  }
  corked.set(stream, held === undefined || held === COALESCE_BATCH ? 1 : held + 1);
}

function writeOut(stream: Writable): void {
  corked.delete(stream);
  stream.uncork();
}
