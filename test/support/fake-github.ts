/**
 * A loopback fake of the few GitHub REST endpoints the platform uses: GitHub has no local
 * stand-in. GET and POST /repos/:owner/:repo/pulls, with GitHub's 422 "A pull request already
 * exists" on a second open PR for the same head, and a few injectable faults; with `app`, a GitHub
 * App's endpoints too: installation tokens minted for a JWT the app's key signed, and the
 * installation of a repository's owner; with `contentLimit`, GitHub's secondary limit on creates
 * as a quota stand-in: a create beyond it is a 403 naming, in `retry-after`, when one is free.
 */
import { verify } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakePull {
  number: number;
  head: string;
  base: string;
  title: string;
  body: string | null;
  state: 'open' | 'closed';
  html_url: string;
}

export interface FakeGitHub {
  /** Base URL to give Octokit (GITHUB_API_URL). */
  readonly url: string;
  /** Authorization headers received, in order. */
  readonly authorizations: (string | undefined)[];
  /** Every request received, in order. */
  readonly requests: { method: string; path: string }[];
  /** Installation tokens minted (with `app`), in order. */
  readonly minted: MintedToken[];
  /** When each pull request was created (epoch ms), in order. */
  readonly creates: number[];
  /** Creates refused by `contentLimit` (403 with retry-after). */
  readonly refusedCreates: number;
  /** Whether `token` is an installation token this fake minted and that has not expired: what a git host checks. */
  validToken(token: string): boolean;
  /**
   * What git may do with `token` on `owner/repo`, as GitHub's git host decides from the token's
   * permissions and repositories: 'write', 'read', or 'none' (not minted here, expired, or not
   * for that repository).
   */
  gitPermission(token: string, owner: string, repo: string): 'write' | 'read' | 'none';
  pulls(owner: string, repo: string): FakePull[];
  /** The next request of this method is answered with this status and body. */
  failNext(method: 'GET' | 'POST', status: number, body: unknown, headers?: Record<string, string>): void;
  /** The next create succeeds on the server, then the connection drops before the answer. */
  dropNextCreateResponse(): void;
  /** The next list answers [] (another worker's create not visible yet). */
  hideNextList(): void;
  close(): Promise<void>;
}

export interface FakeGitHubOptions {
  /** Branches that exist: a PR onto any other base is a 422 like GitHub's. Any base when absent. */
  readonly branches?: readonly string[];
  /**
   * Asked for every request without a queued fault (failNext, ...): a fault for it, or none. The
   * chaos harness injects GitHub's failures with it.
   */
  readonly faults?: (method: string) => FakeGitHubFault | undefined;
  /** A GitHub App this fake knows. */
  readonly app?: FakeGitHubApp;
  /**
   * At most `creates` pull requests created in any `windowMs` (a sliding window, as GitHub counts
   * its secondary limits); a create beyond is refused with GitHub's secondary-limit answer, a 403
   * whose `retry-after` names the seconds until the window's oldest create leaves it.
   */
  readonly contentLimit?: { readonly creates: number; readonly windowMs: number };
}

export interface FakeGitHubApp {
  readonly appId: string;
  /** The app's public key (PEM): a JWT it did not sign is a 401, as GitHub answers. */
  readonly publicKey: string;
  /** The app's installations by account (repository owner). */
  readonly installations: Readonly<
    Record<string, { readonly id: number; readonly permissions: Readonly<Record<string, string>> }>
  >;
  /** The fake's clock (epoch ms): a token expires an hour after it was minted, as GitHub's do. */
  readonly now: () => number;
}

export interface MintedToken {
  readonly installationId: number;
  readonly token: string;
  readonly expiresAt: number;
  /** The token's permissions: those asked for, else the installation's. */
  readonly permissions: Readonly<Record<string, string>>;
  /** The repositories asked for (names), or undefined: every repository of the installation. */
  readonly repositories?: readonly string[];
}

/** 502 before anything happens; a create whose answer is lost; a list that misses an open pull request. */
export type FakeGitHubFault = 'bad-gateway' | 'lost-create' | 'stale-list';

export async function startFakeGitHub(options: FakeGitHubOptions = {}): Promise<FakeGitHub> {
  const repos = new Map<string, FakePull[]>();
  const authorizations: (string | undefined)[] = [];
  const requests: { method: string; path: string }[] = [];
  const minted: MintedToken[] = [];
  const creates: number[] = [];
  let refusedCreates = 0;
  const faults: { method: string; status: number; body: unknown; headers: Record<string, string> }[] = [];
  let dropCreate = false;
  let hideList = false;
  const pullsOf = (key: string): FakePull[] => {
    const list = repos.get(key) ?? [];
    repos.set(key, list);
    return list;
  };

  const server = createServer((req, res) => {
    void handle(req, res).catch((error: unknown) => send(res, 500, { message: String(error) }));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    authorizations.push(req.headers.authorization);
    const url = new URL(req.url ?? '/', 'http://fake');
    requests.push({ method: req.method ?? 'GET', path: url.pathname });
    if (options.app && (url.pathname.startsWith('/app/') || url.pathname.endsWith('/installation')))
      return appEndpoint(options.app, req, url, res);
    const match = /^\/repos\/([^/]+)\/([^/]+)\/pulls$/.exec(url.pathname);
    if (!match) return send(res, 404, { message: 'Not Found' });
    const fault = faults.findIndex((f) => f.method === req.method);
    if (fault >= 0) {
      const [f] = faults.splice(fault, 1);
      return send(res, f!.status, f!.body, f!.headers);
    }
    const injected = options.faults?.(req.method ?? 'GET');
    if (injected === 'bad-gateway') return send(res, 502, { message: 'Bad Gateway' });
    if (injected === 'lost-create' && req.method === 'POST') dropCreate = true;
    if (injected === 'stale-list' && req.method === 'GET') hideList = true;
    const [, owner, repo] = match;
    const list = pullsOf(`${owner}/${repo}`);
    if (req.method === 'GET') {
      const head = url.searchParams.get('head');
      const state = url.searchParams.get('state') ?? 'open';
      if (hideList) {
        hideList = false;
        return send(res, 200, []);
      }
      // GitHub filters by "owner:branch"; same-repo PRs only here.
      const found = list.filter(
        (p) => (head === null || `${owner}:${p.head}` === head) && (state === 'all' || p.state === state),
      );
      return send(res, 200, found);
    }
    if (req.method === 'POST') {
      const input = JSON.parse(await readBody(req)) as { head: string; base: string; title: string; body?: string };
      const limited = options.contentLimit && secondsUntilCreateAllowed(options.contentLimit, creates, Date.now());
      if (limited) {
        refusedCreates += 1;
        return send(
          res,
          403,
          {
            message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
            documentation_url: 'https://docs.github.com/rest/overview/rate-limits-for-the-rest-api',
          },
          { 'retry-after': String(limited) },
        );
      }
      if (options.branches && !options.branches.includes(input.base)) {
        return send(res, 422, validationFailed({ resource: 'PullRequest', field: 'base', code: 'invalid' }));
      }
      if (list.some((p) => p.head === input.head && p.state === 'open')) {
        return send(
          res,
          422,
          validationFailed({
            resource: 'PullRequest',
            code: 'custom',
            message: `A pull request already exists for ${owner}:${input.head}.`,
          }),
        );
      }
      const number = list.length + 1;
      const pull: FakePull = {
        number,
        head: input.head,
        base: input.base,
        title: input.title,
        body: input.body ?? null,
        state: 'open',
        html_url: `https://github.example/${owner}/${repo}/pull/${number}`,
      };
      list.push(pull);
      creates.push(Date.now());
      if (dropCreate) {
        dropCreate = false;
        res.socket?.destroy();
        return;
      }
      return send(res, 201, pull);
    }
    return send(res, 405, { message: 'Method Not Allowed' });
  }

  /**
   * POST /app/installations/:id/access_tokens (optionally narrowed to `repositories` and
   * `permissions`, which may not exceed the installation's: 422 as GitHub answers) and GET
   * /repos/:owner/:repo/installation, as the app (its JWT).
   */
  async function appEndpoint(app: FakeGitHubApp, req: IncomingMessage, url: URL, res: ServerResponse): Promise<void> {
    if (!signedByApp(app, req.headers.authorization))
      return send(res, 401, { message: 'A JSON web token could not be decoded' });
    const fault = faults.findIndex((f) => f.method === req.method);
    if (fault >= 0) {
      const [f] = faults.splice(fault, 1);
      return send(res, f!.status, f!.body, f!.headers);
    }
    const installation = /^\/repos\/([^/]+)\/[^/]+\/installation$/.exec(url.pathname);
    if (installation && req.method === 'GET') {
      const found = app.installations[installation[1]!];
      return found
        ? send(res, 200, { id: found.id, account: { login: installation[1] }, permissions: found.permissions })
        : send(res, 404, { message: 'Not Found' });
    }
    const tokens = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(url.pathname);
    const known = Object.values(app.installations).find((i) => i.id === Number(tokens?.[1]));
    if (!tokens || req.method !== 'POST' || !known) return send(res, 404, { message: 'Not Found' });
    const body = await readBody(req);
    const asked = (body ? JSON.parse(body) : {}) as { repositories?: string[]; permissions?: Record<string, string> };
    const beyond = Object.entries(asked.permissions ?? {}).filter(
      ([name, level]) => LEVELS.indexOf(level) > LEVELS.indexOf(known.permissions[name] ?? 'none'),
    );
    if (beyond.length > 0)
      return send(res, 422, {
        message: `The permissions requested are not granted to this installation: ${beyond.map(([n]) => n).join(', ')}`,
      });
    const token: MintedToken = {
      installationId: known.id,
      token: `ghs_${known.id}_${minted.length + 1}`,
      expiresAt: app.now() + 3_600_000,
      permissions: asked.permissions ?? known.permissions,
      ...(asked.repositories && { repositories: asked.repositories }),
    };
    minted.push(token);
    const repositories = token.repositories?.map((name, i) => ({ id: i + 1, name, full_name: name }));
    return send(res, 201, {
      token: token.token,
      expires_at: new Date(token.expiresAt).toISOString(),
      permissions: token.permissions,
      repository_selection: repositories ? 'selected' : 'all',
      ...(repositories && { repositories }),
    });
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    authorizations,
    requests,
    minted,
    creates,
    get refusedCreates() {
      return refusedCreates;
    },
    validToken: (token) => minted.some((m) => m.token === token && m.expiresAt > (options.app?.now() ?? Date.now())),
    gitPermission: (token, _owner, repo) => {
      const found = minted.find((m) => m.token === token && m.expiresAt > (options.app?.now() ?? Date.now()));
      if (!found || (found.repositories && !found.repositories.includes(repo))) return 'none';
      const contents = found.permissions['contents'];
      return contents === 'write' || contents === 'admin' ? 'write' : contents === 'read' ? 'read' : 'none';
    },
    pulls: (owner, repo) => [...pullsOf(`${owner}/${repo}`)],
    failNext: (method, status, body, headers = {}) => faults.push({ method, status, body, headers }),
    dropNextCreateResponse: () => {
      dropCreate = true;
    },
    hideNextList: () => {
      hideList = true;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

/** Whole seconds until a create fits the window (0: it fits now), rounded up as GitHub's retry-after is. */
function secondsUntilCreateAllowed(
  limit: { readonly creates: number; readonly windowMs: number },
  creates: readonly number[],
  now: number,
): number {
  const inWindow = creates.filter((at) => at > now - limit.windowMs);
  if (inWindow.length < limit.creates) return 0;
  return Math.max(1, Math.ceil((inWindow[inWindow.length - limit.creates]! + limit.windowMs - now) / 1000));
}

/** GitHub's permission levels, weakest first. */
const LEVELS = ['none', 'read', 'write', 'admin'];

function validationFailed(error: Record<string, string>): unknown {
  return {
    message: 'Validation Failed',
    errors: [error],
    documentation_url: 'https://docs.github.com/rest/pulls/pulls#create-a-pull-request',
  };
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
  res.end(JSON.stringify(body));
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** Whether `Bearer <jwt>` is an RS256 JWT the app's key signed, issued by the app. */
function signedByApp(app: FakeGitHubApp, authorization: string | undefined): boolean {
  const [header, payload, signature] = (/^Bearer (.+)$/i.exec(authorization ?? '')?.[1] ?? '').split('.');
  if (!header || !payload || !signature) return false;
  if (!verify('RSA-SHA256', Buffer.from(`${header}.${payload}`), app.publicKey, Buffer.from(signature, 'base64url')))
    return false;
  return String((JSON.parse(Buffer.from(payload, 'base64url').toString()) as { iss?: unknown }).iss) === app.appId;
}
