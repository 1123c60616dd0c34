/**
 * The delay proxy of the network benchmark (test/support/delay-proxy.ts): the round trips it adds
 * (lower bounds only: a busy machine makes anything slower), what it counts, for a plain HTTP
 * client, the git CLI and the adapter's client, and that it closes what it opened.
 */
import { Agent, createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { HttpClient } from 'isomorphic-git';
import nodeHttp from 'isomorphic-git/http/node';
import { applyPatchCommit } from '../../src/adapters/git';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import { startDelayProxy, totals, type DelayProxy } from '../support/delay-proxy';
import { eventually } from '../support/eventually';
import { commitFiles, createRepo, diffOfEdits, git, removeDir, tempDir, writeFiles } from '../support/git-fixtures';

/** Bytes each server-side socket read and wrote, to compare with the proxy's counts. */
interface Upstream {
  readonly server: Server;
  readonly port: number;
  readonly sockets: Socket[];
}

/** An HTTP server that answers every request with its method, path and the length of its body. */
async function startUpstream(): Promise<Upstream> {
  const sockets: Socket[] = [];
  const server = createServer((req, res) => {
    let length = 0;
    req.on('data', (chunk: Buffer) => (length += chunk.length));
    req.on('end', () => res.end(`${req.method ?? ''} ${req.url ?? ''} ${length}`));
  });
  server.on('connection', (socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, sockets };
}

/** One request through `agent`; resolves with the answer's body and the time from sending it to its end (ms). */
function send(
  url: string,
  agent: Agent,
  options: { method?: string; path: string; body?: readonly string[]; chunked?: boolean },
): Promise<{ body: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}${options.path}`,
      { method: options.method ?? 'GET', agent },
      (res: IncomingMessage) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (text: string) => (body += text));
        res.on('end', () => resolve({ body, ms: performance.now() - started }));
      },
    );
    req.on('error', reject);
    const parts = options.body ?? [];
    if (!options.chunked) req.setHeader('Content-Length', Buffer.byteLength(parts.join('')));
    for (const part of parts) req.write(part);
    req.end();
  });
}

const ROUND_TRIP = 100;

describe('startDelayProxy', () => {
  let upstream: Upstream;
  let proxy: DelayProxy;
  let agent: Agent;
  beforeEach(async () => {
    upstream = await startUpstream();
    agent = new Agent({ keepAlive: true, maxSockets: 1 });
  });
  afterEach(async () => {
    agent.destroy();
    await proxy.close();
    upstream.server.closeAllConnections();
    await new Promise<void>((resolve) => upstream.server.close(() => resolve()));
  });

  test('a new connection costs two round trips, a request on a kept-alive one one, each request its server time more', async () => {
    proxy = await startDelayProxy({ upstreamPort: upstream.port, roundTripMs: ROUND_TRIP, requestMs: 50 });
    const first = await send(proxy.url, agent, { path: '/one' });
    const second = await send(proxy.url, agent, { path: '/two' });
    expect(first.body).toBe('GET /one 0');
    expect(second.body).toBe('GET /two 0');
    // Lower bounds only: no assertion on how much longer a busy machine makes them.
    expect(first.ms).toBeGreaterThanOrEqual(2 * ROUND_TRIP + 50);
    expect(second.ms).toBeGreaterThanOrEqual(ROUND_TRIP + 50);
    expect(totals(proxy.take())).toMatchObject({ requests: 2, connections: 1 });
  });

  test('counts requests and bytes each way, bodies by length and chunked, as the server reads and writes them', async () => {
    proxy = await startDelayProxy({ upstreamPort: upstream.port, roundTripMs: 0 });
    const body = ['0123456789'.repeat(1_000), 'tail', '\r\n0\r\n\r\n'];
    expect((await send(proxy.url, agent, { method: 'POST', path: '/chunked', body, chunked: true })).body).toBe(
      `POST /chunked ${body.join('').length}`,
    );
    expect((await send(proxy.url, agent, { method: 'POST', path: '/sized', body })).body).toBe(
      `POST /sized ${body.join('').length}`,
    );
    expect((await send(proxy.url, agent, { path: '/after?x=1' })).body).toBe('GET /after?x=1 0');
    const exchanges = proxy.take();
    expect(exchanges.map((e) => `${e.method} ${e.target} ${String(e.first)}`)).toEqual([
      'POST /chunked true',
      'POST /sized false',
      'GET /after?x=1 false',
    ]);
    const [socket] = upstream.sockets as [Socket];
    expect(upstream.sockets).toHaveLength(1);
    expect(totals(exchanges)).toEqual({
      requests: 3,
      connections: 1,
      sentBytes: socket.bytesRead,
      receivedBytes: socket.bytesWritten,
    });
    expect(proxy.take()).toEqual([]);
  });

  test('closes its sockets: a closed client closes its upstream side, and close() drops kept-alive ones and stops listening', async () => {
    proxy = await startDelayProxy({ upstreamPort: upstream.port, roundTripMs: 20 });
    const raw = connect(proxy.port, '127.0.0.1');
    await new Promise((resolve) => raw.once('connect', resolve));
    // A head in two pieces is one request.
    raw.write('GET /raw HT');
    await sleep(30);
    raw.end('TP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    raw.resume();
    await new Promise((resolve) => raw.once('close', resolve));
    expect(proxy.take().map((e) => `${e.method} ${e.target}`)).toEqual(['GET /raw']);
    await eventually(
      () => proxy.openSockets(),
      (open) => open === 0,
      { what: 'the proxy to close both sides of a finished connection', timeoutMs: 10_000 },
    );

    await send(proxy.url, agent, { path: '/kept' });
    expect(proxy.openSockets()).toBe(2);
    const kept =
      agent.sockets[Object.keys(agent.sockets)[0] as string]?.[0] ??
      agent.freeSockets[Object.keys(agent.freeSockets)[0] as string]?.[0];
    const keptClosed = new Promise((resolve) => kept?.once('close', resolve));
    await proxy.close();
    expect(proxy.openSockets()).toBe(0);
    await keptClosed;
    const refused = connect(proxy.port, '127.0.0.1');
    await expect(
      new Promise((resolve, reject) => refused.once('connect', resolve).once('error', reject)),
    ).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});

describe('startDelayProxy in front of the git server', () => {
  let root: string;
  let server: GitServer;
  let proxy: DelayProxy;
  let baseSha: string;
  beforeAll(async () => {
    root = await tempDir('delay-proxy');
    const source = join(root, 'source');
    await mkdir(source);
    baseSha = await createRepo(source, { 'src/a.ts': 'export const a = 1;\n', 'README.md': 'hello\n' });
    server = await startGitServer({ root: join(root, 'server') });
    await server.importRepository(source, 'demo');
    proxy = await startDelayProxy({ upstreamPort: server.port, roundTripMs: 20 });
  });
  afterAll(async () => {
    // Set unless beforeAll failed part way.
    await (proxy as DelayProxy | undefined)?.close();
    await (server as GitServer | undefined)?.close();
    await removeDir(root);
  });

  test('serves the git CLI (curl, keep-alive, chunked answers): clone, commit and push, every request counted', async () => {
    const work = join(root, 'clone');
    proxy.take();
    await git(root, 'clone', '--quiet', '--filter=blob:none', `${proxy.url}/demo.git`, work);
    const clone = totals(proxy.take());
    const sha = await commitFiles(work, { 'pushed.txt': 'through the proxy\n' }, 'pushed through the proxy');
    await git(work, 'push', '--quiet', 'origin', 'main');
    const push = proxy.take();
    expect(await git(server.gitDir('demo'), 'rev-parse', 'main')).toBe(sha);
    expect(clone.requests).toBeGreaterThanOrEqual(2);
    expect(clone.receivedBytes).toBeGreaterThan(0);
    expect(push.map((e) => `${e.method} ${e.target}`)).toEqual([
      'GET /demo.git/info/refs?service=git-receive-pack',
      'POST /demo.git/git-receive-pack',
    ]);
    await eventually(
      () => proxy.openSockets(),
      (open) => open === 0,
      { what: "the proxy to close the git CLI's connections after it exited", timeoutMs: 20_000 },
    );
  });

  test("serves the adapter's HTTP client, counting the requests it sends", async () => {
    let sent = 0;
    const http: HttpClient = {
      request(req) {
        sent++;
        return nodeHttp.request(req);
      },
    };
    proxy.take();
    const diff = await diffOfEdits(join(root, 'source'), baseSha, (dir) =>
      writeFiles(dir, { 'src/a.ts': 'export const a = 2;\n' }),
    );
    const work = await tempDir('delay-proxy-job');
    try {
      const { commitSha } = await applyPatchCommit(
        {
          repoUrl: `${proxy.url}/demo.git`,
          branch: 'main',
          diff,
          baseSha: await git(server.gitDir('demo'), 'rev-parse', 'main'),
          jobId: 'proxied',
          message: 'through the proxy',
          createdAt: '2026-03-01T12:00:00Z',
          workDir: work,
        },
        { http },
      );
      expect(await git(server.gitDir('demo'), 'rev-parse', 'main')).toBe(commitSha);
    } finally {
      await removeDir(work);
    }
    const counted = totals(proxy.take());
    expect(sent).toBeGreaterThan(0);
    expect(counted.requests).toBe(sent);
  });
});
