import type { Writable } from 'node:stream';

/** Commands a connection holds back within one tick before it writes them out together. */
const COALESCE_BATCH = 16;

/** Connections holding back writes until the end of this tick, with how many commands each holds. */
const corked = new WeakMap<Writable, number>();

/**
 * Holds back the writes on `stream` (a connection the next command is about
 * to be written to) until the end of this tick, or until it holds
 * {@link COALESCE_BATCH} commands. At many cycles in flight, a socket write
 * per command was most of a cycle's client CPU, and the server reads a batch
 * in one go too; a batch of 16 keeps both busy (one batch per tick made
 * client and server wait for each other). The order of writes, the user's own
 * commands on the connection among them, stays as it was.
 */
export function coalesceWrites(stream: Writable | undefined): void {
  if (stream === undefined || !stream.writable) return;
  const held = corked.get(stream);
  if (held === undefined) {
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
