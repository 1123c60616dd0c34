/**
 * The console against what a run, a page or a local program can send it: output that tries to
 * frame events of its own on the live stream, crafted paths and ids, sockets that never finish a
 * request. One local platform (`agent-jobs local up`), jobs sent with the CLI, and Chromium where a
 * browser's own parsing is what matters.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import type { Page } from 'playwright-core';
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from '../e2e/harness';
import { consoleAt, launchChromium, type Browser } from './chromium';

jest.setTimeout(240_000);

let platform: RunningPlatform;
let browser: Browser;
let page: Page;
let consoleUrl: string;
/** Where the printed URL landed: the console's root, under which its pages are. */
let consoleRoot: string;
let source: string;
let repoUrl: string;

beforeAll(async () => {
  platform = await startPlatform();
  consoleUrl = platform.ready.console.openUrl;
  browser = await launchChromium();
  page = await browser.context.newPage();
  await page.goto(consoleUrl);
  consoleRoot = new URL('.', page.url()).toString();
  source = await makeRepository({ 'app.txt': 'one\n' }, ['frames']);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'hostile'])).url;
});

afterAll(async () => {
  await browser?.close();
  await platform?.stop();
  await removeScratch();
});

interface SeenEvent {
  readonly type: string;
  readonly data: string;
}

/** The events the browser's own EventSource parses from a view's live stream in `ms`. */
function liveEvents(view: string, ms: number): Promise<SeenEvent[]> {
  return page.evaluate(`new Promise((resolve) => {
    const seen = [];
    const source = new EventSource('live?view=' + encodeURIComponent(${JSON.stringify(view)}) + '&shown=none');
    const keep = (event) => seen.push({ type: event.type, data: event.data });
    source.addEventListener('region', keep);
    source.addEventListener('message', keep);
    setTimeout(() => { source.close(); resolve(seen); }, ${ms});
  })`);
}

test("a run's output with bare CRs stays text inside one live event: it frames no event of its own", async () => {
  const [diff] = await diffChain(source, [{ 'frames.txt': 'frames\n' }]);
  await platform.cliJson(applyPatchArgs('ws-frames', 'frames-bind', repoUrl, 'frames', diff ?? '', 'Bind'));
  await platform.cliLines(['wait', 'frames-bind', '--timeout', '150']);
  // SSE ends a line at CR, LF or CRLF: this output, sent as it is, ends the region's event and frames one of its own.
  // (The marker is put together by printf, so the command shown on the page does not hold it.)
  const command = "sleep 3; printf 'ok\\r\\revent: region\\rdata: SPOOFED-BY-%s\\r\\r' OUTPUT";
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-frames',
    '--job-id',
    'frames-tests',
    '--command',
    command,
  ]);

  // The job's page, open while it runs: its output arrives by the live swap.
  await page.goto(consoleAt(consoleRoot, '/jobs/frames-tests'));
  await page.evaluate("document.documentElement.setAttribute('data-test-mark', 'kept')");
  await page.locator('#live', { hasText: 'SPOOFED-BY-OUTPUT' }).waitFor({ timeout: 120_000 });
  await page
    .locator('#live', { hasText: 'History and logs' })
    .waitFor({ timeout: 5_000 })
    .catch(() => undefined);
  const region = (await page.locator('#live').textContent()) ?? '';
  const whole = region.includes('History and logs') ? 'the whole region' : region.slice(0, 200);
  expect({ region: whole, outputs: await page.locator('#live pre.output').count() }).toEqual({
    region: 'the whole region',
    outputs: 1,
  });
  await expect(page.locator('#live pre.output').textContent()).resolves.toContain('SPOOFED-BY-OUTPUT');
  expect(await page.evaluate("document.documentElement.getAttribute('data-test-mark')")).toBe('kept');

  // The browser's own parser on the stream: one event, the whole region, the output inside its <pre>.
  const events = await liveEvents('/jobs/frames-tests', 4_000);
  expect(events.map((event) => event.type)).toEqual(['region']);
  expect(events[0]?.data).toMatch(/<pre class="output"[^>]*>[^<]*SPOOFED-BY-OUTPUT[^<]*<\/pre>/);
});

interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** A request as any local program sends it: the path exactly as given, no browser in between. */
function rawGet(pathWithQuery: string, headers: Record<string, string> = {}): Promise<RawAnswer> {
  const { hostname, port } = new URL(consoleUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path: pathWithQuery, method: 'GET', headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.once('error', reject);
    req.end();
  });
}

test("the token's swap for a session redirects on the console's own origin only, whatever the path", async () => {
  const token = new URL(consoleUrl).searchParams.get('token') ?? '';
  const origin = new URL(consoleUrl).origin;
  for (const crafted of [
    '/.//evil.example/x',
    '/./\\evil.example',
    '/..//evil.example/',
    '//evil.example',
    '/\\/evil.example',
    '/%2F/evil.example',
  ]) {
    const answer = await rawGet(`${crafted}?token=${token}`);
    const location = String(answer.headers.location ?? '');
    expect({ crafted, status: answer.status, lands: new URL(location, origin).origin }).toEqual({
      crafted,
      status: 303,
      lands: origin,
    });
  }
  // An ordinary path keeps its place and its query.
  const root = new URL(consoleRoot).pathname;
  expect((await rawGet(`/jobs/x?a=1&token=${token}`)).headers.location).toBe(`${root}jobs/x?a=1`);
  expect((await rawGet(`${root}jobs/x?token=${token}`)).headers.location).toBe(`${root}jobs/x`);
});

/** The session cookie the browser holds, as a header for raw requests. */
async function sessionHeader(): Promise<Record<string, string>> {
  const cookies = await browser.context.cookies(consoleRoot);
  return { Cookie: cookies.map((c) => `${c.name}=${c.value}`).join('; ') };
}

test("a malformed %-escape or an id past the id rule answers 400 naming the request, not the ledger's 500", async () => {
  const session = await sessionHeader();
  const long = 'x'.repeat(8_000);
  const crafted = [
    '/jobs/%E0%A4%A/cancel',
    '/jobs/%E0%A4%A/dismiss',
    '/workspaces/%E0%A4%A/unblock',
    `/jobs/${long}/cancel`,
    `/jobs/${long}/dismiss`,
    `/workspaces/${long}/unblock`,
    `/jobs/${long}`,
    `/workspaces/${long}`,
    `/dlq/redrive?job=${long}`,
  ];
  for (const pathWithQuery of crafted) {
    const answer = await rawGet(`${new URL(consoleRoot).pathname}${pathWithQuery.slice(1)}`, session);
    const problem = /<p class="problem"[^>]*>([^<]*)</.exec(answer.body)?.[1] ?? answer.body.slice(0, 200);
    expect({ pathWithQuery: pathWithQuery.slice(0, 40), status: answer.status, problem }).toEqual({
      pathWithQuery: pathWithQuery.slice(0, 40),
      status: 400,
      problem: expect.stringMatching(/malformed %-escape|must be 1-64 characters/),
    });
  }
});

/** A raw socket to the console and when it closed (undefined while open). */
function rawSocket(): Promise<{ socket: Socket; closedAt: () => number | undefined; received: () => string }> {
  const { hostname, port } = new URL(consoleUrl);
  return new Promise((resolve, reject) => {
    let closedAt: number | undefined;
    let received = '';
    const socket = connect({ host: hostname, port: Number(port) }, () =>
      resolve({ socket, closedAt: () => closedAt, received: () => received }),
    );
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.once('close', () => (closedAt = Date.now()));
    socket.once('error', reject);
  });
}

test('a socket that sends no complete request is closed within seconds; a live stream stays open', async () => {
  const session = await sessionHeader();
  const idle = await Promise.all(Array.from({ length: 50 }, () => rawSocket()));
  const partial = await rawSocket();
  partial.socket.write(`GET /workspaces HTTP/1.1\r\nHost: ${new URL(consoleUrl).host}\r\n`);
  const live = await rawSocket();
  live.socket.write(
    `GET ${new URL(consoleRoot).pathname}live?view=%2Fworkspaces&shown=none HTTP/1.1\r\nHost: ${new URL(consoleUrl).host}\r\nCookie: ${session.Cookie}\r\n\r\n`,
  );
  const opened = Date.now();
  try {
    await new Promise((resolve) => setTimeout(resolve, 15_000));
    const open = [...idle, partial].filter((s) => s.closedAt() === undefined).length;
    expect({ stillOpenAfter15s: open }).toEqual({ stillOpenAfter15s: 0 });
    expect(Math.max(...[...idle, partial].map((s) => (s.closedAt() ?? Infinity) - opened))).toBeLessThan(15_000);
    expect({ liveOpen: live.closedAt() === undefined, answered: live.received().split('\r\n')[0] }).toEqual({
      liveOpen: true,
      answered: 'HTTP/1.1 200 OK',
    });
  } finally {
    for (const s of [...idle, partial, live]) s.socket.destroy();
  }
});

/** A listener on another port of 127.0.0.1, as any local program can open: what the browser sends it. */
async function foreignListener(): Promise<{
  url: string;
  seen: { path: string; headers: IncomingHttpHeaders }[];
  close: () => Promise<void>;
}> {
  const seen: { path: string; headers: IncomingHttpHeaders }[] = [];
  const server = createServer((req, res) => {
    seen.push({ path: req.url ?? '', headers: req.headers });
    res.writeHead(200, { 'Content-Type': 'text/html' }).end('<p>elsewhere</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

test("a listener on another port of 127.0.0.1 gets nothing of the console's session, at any path a page can know", async () => {
  const token = new URL(consoleUrl).searchParams.get('token') ?? '';
  const foreign = await foreignListener();
  try {
    // Browsers scope cookies by host, not by port: the console's page and the foreign page share 127.0.0.1.
    const session = await browser.context.newPage();
    await session.goto(consoleUrl);
    // Every path a page that links there can know (the console's own path prefix is its secret).
    for (const path of ['/', '/workspaces', '/jobs/x', '/s/', '/s/guess/workspaces'])
      await session.goto(`${foreign.url}${path}`);
    await session.close();
    const cookies = foreign.seen.map((request) => ({ path: request.path, cookie: request.headers.cookie ?? '' }));
    expect(cookies.filter((request) => request.cookie.includes(token))).toEqual([]);
    // What it did get opens nothing on the console: each Cookie header it saw, replayed to the console's pages.
    for (const { cookie } of cookies.filter((request) => request.cookie !== '')) {
      for (const path of ['/workspaces', `${new URL(consoleRoot).pathname}workspaces`])
        expect((await rawGet(path, { Cookie: cookie })).status).toBe(401);
    }
  } finally {
    await foreign.close();
  }
});
