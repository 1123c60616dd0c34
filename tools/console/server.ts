/**
 * The operator's console: Node's HTTP server on 127.0.0.1, server-rendered pages (pages.ts) whose
 * live regions follow the ledger over server-sent events (live.ts, swapped in by htmx and its SSE
 * extension), and the actions the CLI runs, each behind a confirmation page, through the same
 * functions of tools/operator. Who may use it: auth.ts. It works on any target a Connection
 * reaches: the local platform, or a deployed stack with the caller's AWS credentials.
 */
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { userInfo } from 'node:os';
import {
  cancelJob,
  connect,
  decodeId,
  dismissalWords,
  dismissJob,
  OperatorError,
  readJob,
  redrive,
  unblockWorkspace,
  type ProblemKind,
} from '../operator';
import type { ResolveOptions } from '../operator/targets';
import {
  changeRefusal,
  hasSession,
  newRoot,
  newToken,
  originRefusal,
  pathInRoot,
  sameToken,
  sessionCookie,
  TOKEN_FIELD,
  type ConsoleAuth,
} from './auth';
import { jobHref, workspaceHref } from './format';
import { html, type Html } from './html';
import { LIVE_EVENT, LiveViews, regionHash } from './live';
import {
  confirmForm,
  dlqPage,
  jobLine,
  jobPage,
  stagesPage,
  timelinePage,
  unblockPreview,
  workspacesPage,
  type PageContext,
  type PageSpec,
} from './pages';
import { CONSOLE_CSS } from './style';

export interface ConsoleOptions {
  /**
   * The target, as plain values (the console connects itself: in the CLI it runs from a bundle of
   * its own, bin/cli-bundle.js, and keeps its objects to itself).
   */
  readonly where: ResolveOptions;
  /** 0: a free port. @default 0 */
  readonly port?: number;
  /** @default a new random token (newToken) */
  readonly token?: string;
  /** How often an open page's live region is read again. @default 1000 */
  readonly liveIntervalMs?: number;
}

export interface ConsoleServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** The URL to open: it carries the token, which the console exchanges for a cookie. */
  readonly openUrl: string;
  readonly token: string;
  readonly port: number;
  close(): Promise<void>;
}

const DEFAULT_LIVE_INTERVAL_MS = 1000;
/**
 * How long a connection may take to send a complete request: one that sends nothing, or headers
 * without end, is closed then (Node's own headersTimeout starts at a request's first byte only).
 * A live stream is a long response to a request already received: these do not touch it.
 */
const REQUEST_WITHIN_MS = 5_000;
const MAX_FORM_BYTES = 16 * 1024;

interface Route {
  readonly pattern: RegExp;
  readonly keys: readonly string[];
  readonly page: PageSpec;
  readonly nav: string;
}

const PAGES: readonly Route[] = [
  { pattern: /^\/workspaces$/, keys: [], page: workspacesPage, nav: 'workspaces' },
  { pattern: /^\/workspaces\/([^/]+)$/, keys: ['workspaceId'], page: timelinePage, nav: 'workspaces' },
  { pattern: /^\/jobs\/([^/]+)$/, keys: ['jobId'], page: jobPage, nav: 'workspaces' },
  { pattern: /^\/dlq$/, keys: [], page: dlqPage, nav: 'dlq' },
  { pattern: /^\/stages$/, keys: [], page: stagesPage, nav: 'stages' },
];

const NAV = [
  ['workspaces', 'Workspaces'],
  ['dlq', 'Dead-letter queues'],
  ['stages', 'Stage queues'],
] as const;

/** The HTTP status of each kind of operator error. */
const STATUS_OF_KIND: Readonly<Record<ProblemKind, number>> = {
  failed: 409,
  invalid: 400,
  notFound: 404,
  unavailable: 503,
};

const SECURITY_HEADERS = {
  'Content-Security-Policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'self'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  // same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on a form's POST.
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

/** htmx's own settings: no inline styles (the CSP forbids them), no eval, no scripts in swapped content. */
const HTMX_CONFIG = JSON.stringify({ includeIndicatorStyles: false, allowEval: false, allowScriptTags: false });

const STATIC: Readonly<Record<string, { type: string; load: () => Promise<string> }>> = {
  '/static/htmx.min.js': {
    type: 'text/javascript',
    load: () => readFile(require.resolve('htmx.org/dist/htmx.min.js'), 'utf8'),
  },
  '/static/sse.min.js': {
    type: 'text/javascript',
    load: () => readFile(require.resolve('htmx-ext-sse/dist/sse.min.js'), 'utf8'),
  },
  '/static/console.css': { type: 'text/css', load: async () => CONSOLE_CSS },
};

function matchPage(pathname: string): { route: Route; params: Record<string, string> } | undefined {
  for (const route of PAGES) {
    const match = route.pattern.exec(pathname);
    if (!match) continue;
    try {
      return {
        route,
        params: Object.fromEntries(route.keys.map((key, i) => [key, decodeURIComponent(match[i + 1] ?? '')])),
      };
    } catch {
      return undefined; // a malformed %-escape: no such page
    }
  }
  return undefined;
}

export async function startConsole(options: ConsoleOptions): Promise<ConsoleServer> {
  const connection = connect(options.where);
  const token = options.token ?? newToken();
  const label = async () => (await connection.target()).label;
  const root = newRoot();
  let auth: ConsoleAuth = { token, port: 0, root };
  const live = new LiveViews(options.liveIntervalMs ?? DEFAULT_LIVE_INTERVAL_MS, (error) => problemHtml(error).text);
  const staticFiles = new Map<string, string>();

  /** A page at `url`, the console's own path of the request (its root taken off). */
  function page(
    response: ServerResponse,
    url: URL,
    status: number,
    title: string,
    nav: string,
    body: Html,
  ): Promise<void> {
    const frame = { title, root, self: `${url.pathname.slice(1)}${url.search}`, nav, body };
    return label().then(
      (target) => send(response, status, layout({ ...frame, target })),
      () => send(response, status, layout({ ...frame, target: 'target not reachable' })),
    );
  }

  async function servePage(
    response: ServerResponse,
    url: URL,
    route: Route,
    params: Record<string, string>,
  ): Promise<void> {
    const context: PageContext = { connection, params, query: url.searchParams, now: Date.now() };
    const title = route.page.title(context);
    let region: Html;
    try {
      region = await route.page.region(context);
    } catch (error) {
      return page(response, url, statusOf(error), title, route.nav, problemHtml(error));
    }
    const view = `${url.pathname}${url.search}`;
    const body = html`${route.page.controls?.(context) ?? ''}
<div id="live" hx-ext="sse" sse-connect="live?view=${encodeURIComponent(view)}&amp;shown=${regionHash(region.text)}" sse-swap="${LIVE_EVENT}">${region}</div>
<p class="live-note">Live: this page follows the ledger without a reload.</p>`;
    return page(response, url, 200, title, route.nav, body);
  }

  function serveLive(response: ServerResponse, url: URL): void {
    const view = new URL(url.searchParams.get('view') ?? '/', 'http://console');
    const found = matchPage(view.pathname);
    if (!found) return void send(response, 404, html`no such view`);
    const key = `${view.pathname}${view.search}`;
    live.subscribe(
      key,
      async () =>
        (await found.route.page.region({ connection, params: found.params, query: view.searchParams, now: Date.now() }))
          .text,
      response,
      url.searchParams.get('shown') ?? '',
    );
  }

  /** GET of an action's path: its confirmation page. */
  async function confirmation(response: ServerResponse, url: URL): Promise<boolean> {
    const unblock = /^\/workspaces\/([^/]+)\/unblock$/.exec(url.pathname);
    if (unblock) {
      const workspaceId = decodeId('workspaceId', unblock[1] ?? '');
      const mode = url.searchParams.get('mode') === 'drop' ? 'drop' : 'replay';
      const what = await unblockPreview(connection, workspaceId, mode);
      const form = confirmForm({
        action: url.pathname.slice(1),
        fields: { mode },
        token,
        submit: mode === 'replay' ? 'Unblock and replay' : 'Unblock and drop',
        back: workspaceHref(workspaceId),
        what,
      });
      await page(response, url, 200, `Unblock workspace ${workspaceId}`, 'workspaces', form);
      return true;
    }
    if (url.pathname === '/dlq/redrive') {
      const jobId = url.searchParams.get('job') ?? '';
      const { job } = await readJob(connection, jobId);
      const what = html`<p>Send ${jobLine(job)} back to its queue to run again: the same as <code>agent-jobs dlq redrive ${jobId}</code>. Messages ahead of it in its workspace's group keep their order.</p>`;
      await page(
        response,
        url,
        200,
        `Redrive ${jobId}`,
        'dlq',
        confirmForm({
          action: 'dlq/redrive',
          fields: { job: jobId },
          token,
          submit: 'Redrive',
          back: jobHref(jobId),
          what,
        }),
      );
      return true;
    }
    const cancel = /^\/jobs\/([^/]+)\/cancel$/.exec(url.pathname);
    if (cancel) {
      const jobId = decodeId('jobId', cancel[1] ?? '');
      const { job } = await readJob(connection, jobId);
      // A running build's job is stopped, not kept from running (decisions §33).
      const effect = job.status === 'RUNNING' || job.status === 'IN_FLIGHT' ? 'its build is stopped' : 'it never runs';
      const what = html`<p>Cancel ${jobLine(job)}: ${effect}. The same as <code>agent-jobs cancel ${jobId}</code>.</p>`;
      await page(
        response,
        url,
        200,
        `Cancel ${jobId}`,
        'workspaces',
        confirmForm({
          action: url.pathname.slice(1),
          fields: {},
          token,
          submit: 'Cancel the job',
          back: jobHref(jobId),
          what,
        }),
      );
      return true;
    }
    const dismiss = /^\/jobs\/([^/]+)\/dismiss$/.exec(url.pathname);
    if (dismiss) {
      const jobId = decodeId('jobId', dismiss[1] ?? '');
      const { job } = await readJob(connection, jobId);
      const what = html`<p>Record the failure of ${jobLine(job)} as dealt with, with your reason, and remove its DLQ copy: it never runs again. The same as <code>agent-jobs dlq dismiss ${jobId} --reason ...</code>. A workspace it blocked stays BLOCKED until you unblock it.</p>`;
      const form = confirmForm({
        action: url.pathname.slice(1),
        fields: {},
        inputs: [{ name: 'reason', label: 'Why it needs no redrive' }],
        token,
        submit: 'Dismiss the failure',
        back: jobHref(jobId),
        what,
      });
      await page(response, url, 200, `Dismiss ${jobId}`, 'dlq', form);
      return true;
    }
    return false;
  }

  /** POST of an action: runs the operation, shows what it did. */
  async function act(response: ServerResponse, url: URL, form: URLSearchParams): Promise<void> {
    const unblock = /^\/workspaces\/([^/]+)\/unblock$/.exec(url.pathname);
    if (unblock) {
      const workspaceId = decodeId('workspaceId', unblock[1] ?? '');
      const result = await unblockWorkspace(connection, workspaceId, form.get('mode') === 'drop' ? 'drop' : 'replay');
      const lines = result.jobs.map(
        (j) =>
          html`<li>${j.action} <a href="${jobHref(j.jobId)}">${j.jobId}</a>${j.status ? ` (${j.status})` : ''}</li>`,
      );
      return outcome(
        response,
        url,
        `Workspace ${workspaceId}: ${result.previousState} \u2192 ${result.workspace.state}`,
        html`${lines.length ? html`<ul>${lines}</ul>` : html`<p>No message of this workspace was on the DLQ.</p>`}`,
        workspaceHref(workspaceId),
      );
    }
    if (url.pathname === '/dlq/redrive') {
      const jobId = form.get('job') ?? '';
      const result = await redrive(connection, { jobIds: [jobId] });
      const done = result.redriven.some((r) => r.jobId === jobId);
      const body = html`<ul>${result.redriven.map((r) => html`<li>redriven from the ${r.queue} DLQ: <a href="${jobHref(r.jobId)}">${r.jobId}</a></li>`)}${result.left.map((l) => html`<li>left on the ${l.queue} DLQ: ${l.jobId}: ${l.why}</li>`)}</ul>`;
      return outcome(
        response,
        url,
        done ? `Redriven: ${jobId}` : `Not redriven: ${jobId}`,
        body,
        jobHref(jobId),
        done ? 200 : 409,
      );
    }
    const cancel = /^\/jobs\/([^/]+)\/cancel$/.exec(url.pathname);
    if (cancel) {
      const jobId = decodeId('jobId', cancel[1] ?? '');
      const cancelled = await cancelJob(connection, jobId);
      return outcome(
        response,
        url,
        `Cancelled: ${jobId}`,
        html`<p>${cancelled.previous} &rarr; CANCELLED: ${cancelled.effect}.</p>`,
        jobHref(jobId),
      );
    }
    const dismiss = /^\/jobs\/([^/]+)\/dismiss$/.exec(url.pathname);
    if (dismiss) {
      const jobId = decodeId('jobId', dismiss[1] ?? '');
      const reason = form.get('reason') ?? '';
      // The console has one operator, the user who started it: the dismissal names them.
      const result = await dismissJob(connection, jobId, { by: `${userInfo().username} (console)`, reason });
      const blocked = result.blockedWorkspace;
      const body = html`<p>FAILED, ${result.job.dismissed ? dismissalWords(result.job.dismissed) : 'dismissed'}: ${result.removed} copy removed from the ${result.queue} DLQ.</p>${
        blocked
          ? html`<p>Workspace <a href="${workspaceHref(blocked.workspaceId)}">${blocked.workspaceId}</a> stays BLOCKED: unblock it to replay or drop its skipped jobs.</p>`
          : ''
      }`;
      return outcome(response, url, `Dismissed: ${jobId}`, body, jobHref(jobId));
    }
    return send(response, 404, html`no such action`);
  }

  function outcome(
    response: ServerResponse,
    url: URL,
    title: string,
    body: Html,
    back: string,
    status = 200,
  ): Promise<void> {
    return page(
      response,
      url,
      status,
      title,
      'workspaces',
      html`<section class="outcome${status === 200 ? '' : ' refused'}" role="status" aria-labelledby="outcome-h"><h2 id="outcome-h">${status === 200 ? 'Done' : 'Refused'}</h2>${body}<p><a href="${back}">Back</a></p></section>`,
    );
  }

  async function handle(request: IncomingMessage, response: ServerResponse, url: URL): Promise<void> {
    const inRoot = pathInRoot(auth, url.pathname);
    const assetPath = inRoot ?? url.pathname;
    const asset = STATIC[assetPath];
    if (request.method === 'GET' && asset) {
      let text = staticFiles.get(assetPath);
      if (text === undefined) staticFiles.set(assetPath, (text = await asset.load()));
      return void response
        .writeHead(200, {
          ...SECURITY_HEADERS,
          'Content-Type': `${asset.type}; charset=utf-8`,
          'Cache-Control': 'max-age=300',
        })
        .end(text);
    }
    const refused = originRefusal(auth, request.headers);
    if (refused) return send(response, refused.status, html`${refused.reason}`);
    // The printed URL's token becomes the session cookie; the token leaves the address bar.
    const given = url.searchParams.get(TOKEN_FIELD);
    if (request.method === 'GET' && given !== null) {
      if (!sameToken(given, token))
        return send(response, 401, html`That token is not this console's: open the URL it printed at start.`);
      url.searchParams.delete(TOKEN_FIELD);
      return void response
        .writeHead(303, {
          ...SECURITY_HEADERS,
          'Set-Cookie': sessionCookie(auth),
          Location: `${root}${ownPath(inRoot ?? url.pathname).slice(1)}${url.search}`,
        })
        .end();
    }
    if (inRoot === undefined || !hasSession(auth, request.headers)) {
      return send(
        response,
        401,
        html`This console needs its token: open the URL it printed at start (it ends in <code>?token=&hellip;</code>).`,
      );
    }
    url.pathname = inRoot;
    if (request.method === 'POST') {
      const form = await readForm(request);
      const change = changeRefusal(auth, request.headers, form);
      if (change) return send(response, change.status, html`${change.reason}`);
      return act(response, url, form);
    }
    if (request.method !== 'GET')
      return void response.writeHead(405, { ...SECURITY_HEADERS, Allow: 'GET, POST' }).end();
    if (url.pathname === '/favicon.ico') return void response.writeHead(204, SECURITY_HEADERS).end();
    if (url.pathname === '/')
      return void response.writeHead(303, { ...SECURITY_HEADERS, Location: `${root}workspaces` }).end();
    if (url.pathname === '/live') return serveLive(response, url);
    const found = matchPage(url.pathname);
    if (found) return servePage(response, url, found.route, found.params);
    if (await confirmation(response, url)) return;
    return page(response, url, 404, 'Not found', '', html`<p>No such page. <a href="workspaces">Workspaces</a></p>`);
  }

  const server = createServer(
    { headersTimeout: REQUEST_WITHIN_MS, requestTimeout: 2 * REQUEST_WITHIN_MS, connectionsCheckingInterval: 1_000 },
    (request, response) => {
      const url = new URL(request.url ?? '/', 'http://console');
      handle(request, response, url).catch((error: unknown) => {
        if (response.headersSent) return void response.end();
        return page(response, url, statusOf(error), 'Refused', '', problemHtml(error)).catch(() => response.end());
      });
    },
  );
  server.on('connection', closeUnlessRequested);
  server.on('request', (request: IncomingMessage) => request.socket.setTimeout(0));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  auth = { token, port, root };
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    openUrl: `${url}/?${TOKEN_FIELD}=${token}`,
    token,
    port,
    close: async () => {
      live.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      connection.close();
    },
  };
}

/**
 * A path to redirect to on this console: one leading slash. `//host/x` in a Location is another
 * origin's URL, and a path such as `/.//host` or `/./\\host` parses to one (URL turns `\\` into `/`).
 */
function ownPath(pathname: string): string {
  const path = `/${pathname.replace(/^[/\\]+/, '')}`;
  return path === '/' ? '/workspaces' : path;
}

/** A new connection is closed unless a request arrives on it in time (cleared on its first request). */
function closeUnlessRequested(socket: Socket): void {
  socket.setTimeout(REQUEST_WITHIN_MS, () => socket.destroy());
}

function statusOf(error: unknown): number {
  return error instanceof OperatorError ? STATUS_OF_KIND[error.kind] : 500;
}

function problemHtml(error: unknown): Html {
  const message = error instanceof Error ? error.message : String(error);
  return html`<p class="problem" role="alert">${error instanceof OperatorError ? '' : 'Cannot read the platform: '}${message}</p>`;
}

function send(response: ServerResponse, status: number, body: Html): Promise<void> {
  response.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': 'text/html; charset=utf-8' });
  response.end(body.text);
  return Promise.resolve();
}

async function readForm(request: IncomingMessage): Promise<URLSearchParams> {
  let body = '';
  for await (const chunk of request) {
    body += (chunk as Buffer).toString('utf8');
    if (body.length > MAX_FORM_BYTES) break;
  }
  return new URLSearchParams(body.slice(0, MAX_FORM_BYTES));
}

interface Frame {
  readonly title: string;
  readonly target: string;
  /** The console's root, every relative link's base. */
  readonly root: string;
  /** This page's path and query, relative to the root: a fragment link must name it (the base is not the page). */
  readonly self: string;
  readonly nav: string;
  readonly body: Html;
}

function layout({ title, target, root, self, nav, body }: Frame): Html {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><base href="${root}"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="htmx-config" content="${HTMX_CONFIG}">
<title>${title} &middot; agent-jobs console</title>
<link rel="stylesheet" href="static/console.css">
<script src="static/htmx.min.js" defer></script><script src="static/sse.min.js" defer></script>
</head><body>
<a class="skip" href="${self}#main">Skip to the content</a>
<header><strong>agent-jobs console</strong><span class="target">${target}</span>
<nav aria-label="Sections">${NAV.map(([href, text]) => html`<a href="${href}"${href === nav ? html` aria-current="page"` : ''}>${text}</a>`)}</nav></header>
<main id="main"><h1>${title}</h1>
${body}
</main></body></html>`;
}
