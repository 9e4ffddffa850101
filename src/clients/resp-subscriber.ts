import { connect as connectTcp, isIP, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import type { Subscriber, SubscriberEvents } from './driver.js';

/** Where and how a {@link RespSubscriber} connects: what GLIDE's options say of one server. */
export interface RespEndpoint {
  /** Every address to try, in order: the next after a failure to connect or to authenticate. */
  readonly addresses: readonly { readonly host: string; readonly port: number }[];
  readonly username?: string | undefined;
  readonly password?: string | undefined;
  /** The connection's name (`CLIENT SETNAME`), as the client's own connections carry it. */
  readonly name?: string | undefined;
  /** TLS: the CA to trust (PEM; the system's when absent), and whether to skip verification. */
  readonly tls?: { readonly ca?: string | Buffer | undefined; readonly insecure?: boolean | undefined } | undefined;
  /** Why no subscriber can be made from the client's options (IAM credentials): subscribing then fails with it. */
  readonly unusable?: string | undefined;
}

/** How often the subscriber looks whether its owner was closed. */
const OWNER_CHECK_MS = 1_000;
/** TCP keepalive's first probe on an idle connection. */
const KEEPALIVE_MS = 5_000;

/** A reply to one command sent on the connection, in order. */
type Pending = { resolve(): void; reject(error: Error): void };

/** A subscriber that can never work with the options given (IAM credentials): the hub reports it once, and stops trying. */
export class SubscriberUnusableError extends Error {
  override readonly name = 'SubscriberUnusableError';
  readonly permanent = true;
}

/**
 * The wake-up subscriber on one server for a client that cannot subscribe to
 * sharded channels itself (GLIDE's `GlideClient`): one connection of its own
 * (RESP2, `AUTH` and `CLIENT SETNAME` as configured, then `SSUBSCRIBE`), with
 * TCP keepalive and a handshake bound; each address is tried in turn. The
 * endpoint is read again on each connection (a rotated password). A closed
 * connection is reported to the hub (`lost`), whose next subscription
 * connects again; the hub's echo check finds a connection gone silent and
 * calls {@link reconnect}.
 */
export class RespSubscriber implements Subscriber {
  /** The connection in use, once it passed its handshake. */
  private socket: Socket | undefined;
  /** The connection whose replies are read (the one in its handshake, then in use). */
  private reading: Socket | undefined;
  private ready: Promise<Socket> | undefined;
  private readonly channels = new Set<string>();
  private pending: Pending[] = [];
  private buffer: Buffer = Buffer.alloc(0);
  private closed = false;
  private readonly ownerCheck: NodeJS.Timeout;

  constructor(
    /** Where to connect, read on each connection. */
    private readonly endpoint: () => RespEndpoint,
    private readonly events: SubscriberEvents,
    /** Whether the client this subscriber serves was closed: it then closes too (that client emits no event). */
    private readonly ownerClosed: () => boolean,
    /** How long connecting, `AUTH` and `CLIENT SETNAME` may take, per address (`SubscriberOptions.handshakeMs`). */
    private readonly handshakeMs: number,
  ) {
    this.ownerCheck = setInterval(() => this.ownerClosed() && this.close(), OWNER_CHECK_MS).unref();
  }

  async subscribe(channel: string): Promise<void> {
    const socket = await this.open();
    this.channels.add(channel);
    await this.send(socket, ['SSUBSCRIBE', channel]);
  }

  unsubscribe(channel: string): void {
    if (!this.channels.delete(channel) || !this.socket || this.ready === undefined) return;
    this.ready.then((socket) => this.send(socket, ['SUNSUBSCRIBE', channel])).catch(() => undefined);
  }

  reconnect(channels: readonly string[]): void {
    for (const channel of channels) this.channels.delete(channel);
    this.socket?.destroy(); // its other channels reported as lost; the hub's next subscription connects again
  }

  close(): void {
    this.closed = true;
    clearInterval(this.ownerCheck);
    this.channels.clear();
    this.socket?.destroy();
    this.reading?.destroy();
    this.socket = this.reading = this.ready = undefined;
    this.failAll(new Error('the wake-up subscriber was closed'));
  }

  /** The connection, authenticated; made on first use and after a loss. */
  private open(): Promise<Socket> {
    if (this.closed) return Promise.reject(new Error('the wake-up subscriber was closed'));
    if (this.ownerClosed()) {
      this.close();
      return Promise.reject(new Error('the wake-up subscriber was closed with its GLIDE client'));
    }
    if (this.ready === undefined) {
      const ready = (this.ready = this.connectAny());
      ready.catch(() => {
        if (this.ready === ready) this.ready = undefined;
      });
    }
    return this.ready;
  }

  /** Each address in turn, until one connects and authenticates. */
  private async connectAny(): Promise<Socket> {
    const endpoint = this.endpoint();
    if (endpoint.unusable !== undefined) throw new SubscriberUnusableError(endpoint.unusable);
    const errors: string[] = [];
    for (const address of endpoint.addresses) {
      if (this.closed) break;
      try {
        return await this.connect(endpoint, address.host, address.port);
      } catch (error) {
        errors.push(`${address.host}:${address.port}: ${(error as Error).message}`);
      }
    }
    throw new Error(`the wake-up subscriber could not connect (${errors.join('; ') || 'no address'}); waiters re-check meanwhile`);
  }

  private connect(endpoint: RespEndpoint, host: string, port: number): Promise<Socket> {
    const { tls } = endpoint;
    const socket = tls
      ? connectTls({
          host,
          port,
          ...(isIP(host) === 0 && { servername: host }),
          ...(tls.ca !== undefined && { ca: tls.ca }),
          rejectUnauthorized: tls.insecure !== true,
        })
      : connectTcp({ host, port });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, KEEPALIVE_MS);
    this.reading = socket;
    this.buffer = Buffer.alloc(0);
    socket.on('data', (data: Buffer) => this.read(socket, data));
    socket.on('error', () => undefined); // the close that follows says it, with the address
    socket.once('close', () => this.lost(socket, host, port));
    let timer: NodeJS.Timeout | undefined;
    const handshake = new Promise<Socket>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.handshakeMs} ms`)), this.handshakeMs);
      socket.once('close', () => reject(new Error('the connection closed')));
      socket.once(tls ? 'secureConnect' : 'connect', () => {
        const { username, password, name } = endpoint;
        (async () => {
          if (password !== undefined) await this.send(socket, username ? ['AUTH', username, password] : ['AUTH', password]);
          if (name) await this.send(socket, ['CLIENT', 'SETNAME', name]);
        })().then(() => {
          this.socket = socket;
          resolve(socket);
        }, reject);
      });
    });
    return handshake
      .catch((error: unknown) => {
        socket.destroy();
        if (this.reading === socket) this.reading = undefined;
        this.failAll(error as Error); // its AUTH, unanswered: not the next connection's
        throw error;
      })
      .finally(() => clearTimeout(timer));
  }

  /** Writes `command` and resolves with its reply (an error reply rejects). */
  private send(socket: Socket, command: readonly string[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      socket.write(encode(command));
    });
  }

  /** A connection closed: its commands fail, and its channels are reported lost (the hub subscribes them again). */
  private lost(socket: Socket, host: string, port: number): void {
    if (this.socket !== socket) return;
    this.socket = this.reading = this.ready = undefined;
    this.failAll(new Error(`the wake-up subscriber's connection to ${host}:${port} closed`));
    if (this.closed || this.channels.size === 0) return;
    const channels = [...this.channels];
    this.channels.clear();
    if (this.ownerClosed()) {
      this.close();
      return;
    }
    this.events.error(new Error(`the wake-up subscriber's connection to ${host}:${port} closed; waiters re-check until it is back`));
    this.events.lost(channels);
  }

  private failAll(error: Error): void {
    const pending = this.pending;
    this.pending = [];
    for (const p of pending) p.reject(error);
  }

  /** Parses what arrived: messages go to the events, replies to their commands in order. */
  private read(socket: Socket, data: Buffer): void {
    if (this.reading !== socket) return;
    this.buffer = this.buffer.length === 0 ? data : Buffer.concat([this.buffer, data]);
    let at = 0;
    try {
      for (;;) {
        const parsed = parse(this.buffer, at);
        if (parsed === undefined) break;
        at = parsed.end;
        this.frame(parsed.value);
      }
    } catch (error) {
      this.events.error(error as Error);
      socket.destroy(); // out of step with the server: start over
      return;
    }
    this.buffer = this.buffer.subarray(at);
  }

  private frame(value: Value): void {
    if (Array.isArray(value) && value[0] === 'smessage') {
      this.events.message(String(value[1]), String(value[2]));
      return;
    }
    const pending = this.pending.shift();
    if (value instanceof Error) pending?.reject(value);
    else pending?.resolve();
  }
}

type Value = string | number | null | Error | Value[];

/** A command as RESP: an array of bulk strings. */
function encode(command: readonly string[]): Buffer {
  let out = `*${command.length}\r\n`;
  for (const arg of command) out += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
  return Buffer.from(out);
}

/** One RESP2 value at `at`, or undefined when it has not all arrived. */
function parse(buffer: Buffer, at: number): { value: Value; end: number } | undefined {
  const eol = buffer.indexOf('\r\n', at);
  if (eol < 0) return undefined;
  const type = String.fromCharCode(buffer[at]!);
  const line = buffer.toString('utf8', at + 1, eol);
  switch (type) {
    case '+':
      return { value: line, end: eol + 2 };
    case '-':
      return { value: new Error(line), end: eol + 2 };
    case ':':
      return { value: Number(line), end: eol + 2 };
    case '$': {
      const length = Number(line);
      if (length < 0) return { value: null, end: eol + 2 };
      if (buffer.length < eol + 2 + length + 2) return undefined;
      return { value: buffer.toString('utf8', eol + 2, eol + 2 + length), end: eol + 2 + length + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, end: eol + 2 };
      const items: Value[] = [];
      let end = eol + 2;
      for (let i = 0; i < count; i++) {
        const item = parse(buffer, end);
        if (item === undefined) return undefined;
        items.push(item.value);
        end = item.end;
      }
      return { value: items, end };
    }
    default:
      throw new Error(`the wake-up subscriber read an unknown RESP type "${type}"`);
  }
}
