import { connect as connectTcp, isIP, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import type { Subscriber, SubscriberEvents } from './driver.js';

/** Where and how a {@link RespSubscriber} connects: what GLIDE's options say of one server. */
export interface RespEndpoint {
  readonly host: string;
  readonly port: number;
  readonly username?: string | undefined;
  readonly password?: string | undefined;
  /** The connection's name (`CLIENT SETNAME`), as the client's own connections carry it. */
  readonly name?: string | undefined;
  /** TLS: the CA to trust (PEM; the system's when absent), and whether to skip verification. */
  readonly tls?: { readonly ca?: string | Buffer | undefined; readonly insecure?: boolean | undefined } | undefined;
}

/** How often the subscriber looks whether its owner was closed. */
const OWNER_CHECK_MS = 1_000;
/** Pause before reconnecting, longer per failure up to the last. */
const RECONNECT_MS = [50, 100, 200, 400, 800, 1_000];

/** A reply to one command sent on the connection, in order. */
type Pending = { resolve(): void; reject(error: Error): void };

/**
 * The wake-up subscriber on one server for a client that cannot subscribe to
 * sharded channels itself (GLIDE's `GlideClient`): one connection of its own
 * (RESP2, `AUTH` and `CLIENT SETNAME` as configured, then `SSUBSCRIBE`), reconnected with backoff while the
 * owner is open, its channels subscribed again on each new connection.
 */
export class RespSubscriber implements Subscriber {
  private socket: Socket | undefined;
  private ready: Promise<Socket> | undefined;
  private readonly channels = new Set<string>();
  private pending: Pending[] = [];
  private buffer: Buffer = Buffer.alloc(0);
  private failures = 0;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private readonly ownerCheck: NodeJS.Timeout;

  constructor(
    private readonly endpoint: RespEndpoint,
    private readonly events: SubscriberEvents,
    /** Whether the client this subscriber serves was closed: it then closes too (that client emits no event). */
    private readonly ownerClosed: () => boolean,
  ) {
    this.ownerCheck = setInterval(() => this.ownerClosed() && this.close(), OWNER_CHECK_MS).unref();
  }

  async subscribe(channel: string): Promise<void> {
    this.channels.add(channel);
    const socket = await this.open();
    await this.send(socket, ['SSUBSCRIBE', channel]);
  }

  unsubscribe(channel: string): void {
    if (!this.channels.delete(channel) || !this.socket || this.ready === undefined) return;
    this.ready.then((socket) => this.send(socket, ['SUNSUBSCRIBE', channel])).catch(() => undefined);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.ownerCheck);
    this.channels.clear();
    this.socket?.destroy();
    this.socket = this.ready = undefined;
    this.failAll(new Error('the wake-up subscriber was closed'));
  }

  /** The connection, authenticated; made on first use and after a loss. */
  private open(): Promise<Socket> {
    if (this.closed) return Promise.reject(new Error('the wake-up subscriber was closed'));
    this.ready ??= this.connect();
    return this.ready;
  }

  private connect(): Promise<Socket> {
    const { host, port, tls } = this.endpoint;
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
    this.socket = socket;
    this.buffer = Buffer.alloc(0);
    socket.on('data', (data: Buffer) => this.read(data));
    socket.on('error', (error) => this.events.error(error));
    socket.once('close', () => this.lost(socket));
    const connected = new Promise<void>((resolve, reject) => {
      socket.once(tls ? 'secureConnect' : 'connect', resolve);
      socket.once('close', () => reject(new Error(`the wake-up subscriber's connection to ${host}:${port} closed`)));
    });
    const { username, password, name } = this.endpoint;
    return connected
      .then(async () => {
        if (password !== undefined) await this.send(socket, username ? ['AUTH', username, password] : ['AUTH', password]);
        if (name) await this.send(socket, ['CLIENT', 'SETNAME', name]);
        this.failures = 0;
        return socket;
      })
      .catch((error: unknown) => {
        socket.destroy(); // tried again after a pause while channels wait
        throw error;
      });
  }

  /** Writes `command` and resolves with its reply (an error reply rejects). */
  private send(socket: Socket, command: readonly string[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      socket.write(encode(command));
    });
  }

  /** A connection closed: its commands fail, and unless closed on purpose, a new one subscribes the channels again. */
  private lost(socket: Socket): void {
    if (this.socket !== socket) return;
    this.socket = this.ready = undefined;
    this.failAll(new Error(`the wake-up subscriber's connection to ${this.endpoint.host}:${this.endpoint.port} closed`));
    if (this.closed) return;
    if (this.ownerClosed()) {
      this.close();
      return;
    }
    const delay = RECONNECT_MS[Math.min(this.failures++, RECONNECT_MS.length - 1)]!;
    this.reconnectTimer = setTimeout(() => {
      if (this.closed || this.channels.size === 0) return;
      if (this.ownerClosed()) {
        this.close();
        return;
      }
      this.open()
        .then((s) => Promise.all([...this.channels].map((channel) => this.send(s, ['SSUBSCRIBE', channel]))))
        .catch((error: unknown) => this.events.error(error as Error));
    }, delay);
    this.reconnectTimer.unref();
  }

  private failAll(error: Error): void {
    const pending = this.pending;
    this.pending = [];
    for (const p of pending) p.reject(error);
  }

  /** Parses what arrived: messages go to the events, replies to their commands in order. */
  private read(data: Buffer): void {
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
      this.socket?.destroy(); // out of step with the server: start over
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
