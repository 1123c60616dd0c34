/**
 * A loopback TCP proxy in front of an HTTP server (the loopback git server) that puts a network
 * between a client and it, and counts what crosses it, the same way for every client (the git CLI
 * through curl, the adapter through Node's HTTP client).
 *
 * What it models, with `roundTripMs` = R and `requestMs` = S:
 * - latency: every byte takes R/2 from the client to the server and R/2 back (a delay line each
 *   way, in order), so a request and its answer cost one round trip, however the client frames them
 *   (keep-alive, chunked bodies, `Expect: 100-continue`);
 * - the TCP handshake: a new connection carries nothing for its first R (SYN, SYN-ACK), so the
 *   first request on it costs two round trips, the next ones on a kept-alive connection one;
 * - the host's own time per request, separately: the first byte of each request waits S more (the
 *   loopback server's own time, a `git http-backend` process per request, comes on top).
 *
 * What it does not model: bandwidth (bytes cross at loopback speed once delayed), TCP slow start
 * and congestion, loss and retransmission, TLS (no handshake round trips: a host over HTTPS costs
 * one or two more round trips per new connection), DNS, or any timer finer than Node's (a delay is
 * never shorter than asked, sometimes a millisecond or more longer on a busy machine).
 *
 * It reads the client's stream as HTTP/1.1 requests (Content-Length or chunked bodies) only to
 * count them: each exchange is one request, the bytes the client sent for it (head and body) and
 * the bytes the server sent back while it was the connection's latest request (no client here
 * pipelines). Bytes are counted on the wire: headers and chunk framing included.
 */
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';

const LOOPBACK = '127.0.0.1';

export interface DelayProxyOptions {
  /** Port of the server on 127.0.0.1 the proxy forwards to. */
  readonly upstreamPort: number;
  /** Round trip time added between client and server (ms): R/2 each way, and R per new connection. */
  readonly roundTripMs: number;
  /** The server's own time per request (ms), added once to each request. @default 0 */
  readonly requestMs?: number;
}

/** One request and its answer, as the proxy saw them. */
export interface ProxyExchange {
  /** When its first byte reached the proxy (ms since the epoch, sub-millisecond: `performance.timeOrigin` based). */
  readonly at: number;
  /** Which connection (numbered from 1 in the order they were opened). */
  readonly connection: number;
  /** The first request on its connection: it paid the handshake. */
  readonly first: boolean;
  /** Method and request target (path and query); empty until its head has arrived whole. */
  method: string;
  target: string;
  /** Bytes the client sent for it, and the server sent back while it was the connection's latest request. */
  sentBytes: number;
  receivedBytes: number;
}

export interface ProxyTotals {
  readonly requests: number;
  /** New connections (handshakes). */
  readonly connections: number;
  readonly sentBytes: number;
  readonly receivedBytes: number;
}

export interface DelayProxy {
  /** `http://127.0.0.1:<port>`: the server's URLs with this origin go through the proxy. */
  readonly url: string;
  readonly port: number;
  /**
   * The exchanges since the last `take()` (or the start), and a new log from now on. An exchange
   * still in flight keeps counting its bytes on the object returned.
   */
  take(): ProxyExchange[];
  /** Sockets open now, both sides counted (a client connection and its upstream one are two). */
  openSockets(): number;
  /** Stops listening, drops every connection and pending delay; resolves once the listener is closed. */
  close(): Promise<void>;
}

/** Requests, handshakes and bytes of some exchanges. */
export function totals(exchanges: readonly ProxyExchange[]): ProxyTotals {
  return {
    requests: exchanges.length,
    connections: exchanges.filter((e) => e.first).length,
    sentBytes: exchanges.reduce((sum, e) => sum + e.sentBytes, 0),
    receivedBytes: exchanges.reduce((sum, e) => sum + e.receivedBytes, 0),
  };
}

const now = () => performance.timeOrigin + performance.now();

export async function startDelayProxy(options: DelayProxyOptions): Promise<DelayProxy> {
  const half = options.roundTripMs / 2;
  const requestMs = options.requestMs ?? 0;
  const sockets = new Set<Socket>();
  let log: ProxyExchange[] = [];
  let connections = 0;
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };

  // Half-open allowed on both sides: a side that ends is ended on the other only once what is on
  // its way there arrived (Node would otherwise end it at once, ahead of the delayed bytes).
  const server = createServer({ allowHalfOpen: true }, (client) => {
    const connection = ++connections;
    // The handshake: nothing the client sends moves before one round trip after it connected.
    const open = now() + options.roundTripMs;
    const upstream = createConnection({ host: LOOPBACK, port: options.upstreamPort, allowHalfOpen: true });
    track(client);
    track(upstream);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    const toServer = new DelayLine(client, upstream);
    const toClient = new DelayLine(upstream, client);
    const framer = new RequestFramer();
    let current: ProxyExchange | undefined;
    client.on('data', (chunk: Buffer) => {
      const arrived = now();
      let from = 0;
      let starts = false;
      for (const event of framer.feed(chunk)) {
        if (event.kind === 'start') {
          if (current) current.sentBytes += event.offset - from;
          from = event.offset;
          current = {
            at: arrived,
            connection,
            first: current === undefined,
            method: '',
            target: '',
            sentBytes: 0,
            receivedBytes: 0,
          };
          log.push(current);
          starts = true;
        } else if (current) {
          current.method = event.method;
          current.target = event.target;
        }
      }
      if (current) current.sentBytes += chunk.length - from;
      toServer.push(chunk, Math.max(arrived, open) + half + (starts ? requestMs : 0));
    });
    upstream.on('data', (chunk: Buffer) => {
      if (current) current.receivedBytes += chunk.length;
      toClient.push(chunk, now() + half);
    });
    // A side that ends or closes: the other is ended once what is on its way there arrived
    // (what the server sent before closing still reaches the client, late as the rest).
    for (const [socket, outgoing, incoming] of [
      [client, toServer, toClient],
      [upstream, toClient, toServer],
    ] as const) {
      socket.once('end', () => outgoing.end());
      socket.once('close', () => {
        outgoing.end();
        incoming.cancel();
      });
      // A reset or a refused upstream: both sides go at once, as a broken connection does.
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, LOOPBACK, resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${LOOPBACK}:${port}`,
    port,
    take() {
      const taken = log;
      log = [];
      return taken;
    },
    openSockets: () => sockets.size,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Each socket's close cancels the delays toward it.
      const gone = [...sockets].map((socket) => new Promise((resolve) => socket.once('close', resolve)));
      for (const socket of sockets) socket.destroy();
      await Promise.all([closed, ...gone]);
    },
  };
}

/**
 * Bytes from `source` to `dest`, each chunk written no earlier than the time it was pushed with,
 * in order (a chunk never overtakes the one before it). Backpressure: while `dest` is full,
 * `source` is paused.
 */
class DelayLine {
  private readonly queue: { chunk: Buffer; at: number }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private last = 0;
  private ending = false;

  constructor(
    private readonly source: Socket,
    private readonly dest: Socket,
  ) {}

  /** Queues `chunk` for `at` (ms since the epoch, as `now()`). */
  push(chunk: Buffer, at: number): void {
    this.last = Math.max(at, this.last);
    this.queue.push({ chunk, at: this.last });
    this.pump();
  }

  /** The source ended: end `dest` once the queue is written. */
  end(): void {
    if (this.ending) return;
    this.ending = true;
    this.pump();
  }

  /** `dest` is gone: drop what was on its way. */
  cancel(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }

  private pump(): void {
    if (this.timer || this.dest.destroyed) return;
    const time = now();
    while (this.queue.length && (this.queue[0] as { at: number }).at <= time) {
      const { chunk } = this.queue.shift() as { chunk: Buffer };
      if (!this.dest.write(chunk) && !this.source.isPaused()) {
        this.source.pause();
        this.dest.once('drain', () => this.source.resume());
      }
    }
    const head = this.queue[0];
    if (head) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.pump();
      }, head.at - time);
      return;
    }
    if (this.ending) this.dest.end();
  }
}

type FramerEvent =
  | { readonly kind: 'start'; readonly offset: number }
  | { readonly kind: 'head'; readonly method: string; readonly target: string };

const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');
/** A request head longer than this is not HTTP as these clients send it: the framer stops counting. */
const MAX_HEAD = 64 * 1024;

/**
 * Finds where HTTP/1.1 requests begin in a client's byte stream, chunk by chunk: a head up to its
 * blank line, then a body of Content-Length bytes or chunked (sizes, data, trailers). On anything
 * it cannot read it stops (`opaque`): bytes still flow, counted to the last request.
 */
class RequestFramer {
  private mode: 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'trailer' | 'opaque' = 'head';
  /** The head, chunk-size line or trailer read so far. */
  private buffer = Buffer.alloc(0);
  private remaining = 0;

  feed(chunk: Buffer): FramerEvent[] {
    const events: FramerEvent[] = [];
    let at = 0;
    while (at < chunk.length && this.mode !== 'opaque') {
      if (this.mode === 'length' || this.mode === 'chunk-data') {
        const take = Math.min(this.remaining, chunk.length - at);
        at += take;
        this.remaining -= take;
        if (this.remaining === 0) this.mode = this.mode === 'length' ? 'head' : 'chunk-size';
        continue;
      }
      if (this.mode === 'head' && this.buffer.length === 0) events.push({ kind: 'start', offset: at });
      // Read up to the end of the head, line or trailer, or the whole chunk when it is not there yet.
      const before = this.buffer.length;
      this.buffer = Buffer.concat([this.buffer, chunk.subarray(at)]);
      const done = this.complete();
      if (done === undefined) {
        at = chunk.length;
        if (this.buffer.length > MAX_HEAD) this.mode = 'opaque';
        continue;
      }
      at += done - before;
      const text = this.buffer.subarray(0, done).toString('latin1');
      this.buffer = Buffer.alloc(0);
      this.advance(text, events);
    }
    return events;
  }

  /** Where the current head, chunk-size line or trailer ends in `buffer` (just past it), if it does. */
  private complete(): number | undefined {
    if (this.mode === 'chunk-size') {
      const end = this.buffer.indexOf(CRLF);
      return end < 0 ? undefined : end + 2;
    }
    if (this.mode === 'trailer' && this.buffer.subarray(0, 2).equals(CRLF)) return 2;
    const end = this.buffer.indexOf(HEAD_END);
    return end < 0 ? undefined : end + 4;
  }

  private advance(text: string, events: FramerEvent[]): void {
    if (this.mode === 'trailer') {
      this.mode = 'head';
      return;
    }
    if (this.mode === 'chunk-size') {
      // The CRLF after a chunk's data comes first: an empty line, then the next size line.
      if (text === '\r\n') return;
      const size = Number.parseInt(text.split(';')[0] as string, 16);
      if (Number.isNaN(size)) this.mode = 'opaque';
      else if (size === 0) this.mode = 'trailer';
      else [this.mode, this.remaining] = ['chunk-data', size];
      return;
    }
    const [requestLine = '', ...headerLines] = text.split('\r\n');
    const [method = '', target = ''] = requestLine.split(' ');
    events.push({ kind: 'head', method, target });
    const header = (name: string) =>
      headerLines
        .filter((line) => line.toLowerCase().startsWith(`${name}:`))
        .map((line) =>
          line
            .slice(name.length + 1)
            .trim()
            .toLowerCase(),
        )
        .join(', ');
    const length = header('content-length');
    if (/(^|,)\s*chunked\s*$/.test(header('transfer-encoding'))) this.mode = 'chunk-size';
    else if (length !== '') {
      this.remaining = Number.parseInt(length, 10);
      this.mode = Number.isNaN(this.remaining) ? 'opaque' : this.remaining > 0 ? 'length' : 'head';
    }
  }
}
