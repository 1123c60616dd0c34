/**
 * A loopback fake of the few GitHub REST endpoints the open_pr stage uses: GitHub has no local
 * stand-in. GET and POST /repos/:owner/:repo/pulls, with GitHub's 422 "A pull request already
 * exists" on a second open PR for the same head, and a few injectable faults.
 */
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
}

/** 502 before anything happens; a create whose answer is lost; a list that misses an open pull request. */
export type FakeGitHubFault = 'bad-gateway' | 'lost-create' | 'stale-list';

export async function startFakeGitHub(options: FakeGitHubOptions = {}): Promise<FakeGitHub> {
  const repos = new Map<string, FakePull[]>();
  const authorizations: (string | undefined)[] = [];
  const requests: { method: string; path: string }[] = [];
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
      const found = list.filter((p) => (head === null || `${owner}:${p.head}` === head) && (state === 'all' || p.state === state));
      return send(res, 200, found);
    }
    if (req.method === 'POST') {
      const input = JSON.parse(await readBody(req)) as { head: string; base: string; title: string; body?: string };
      if (options.branches && !options.branches.includes(input.base)) {
        return send(res, 422, validationFailed({ resource: 'PullRequest', field: 'base', code: 'invalid' }));
      }
      if (list.some((p) => p.head === input.head && p.state === 'open')) {
        return send(res, 422, validationFailed({ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${owner}:${input.head}.` }));
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
      if (dropCreate) {
        dropCreate = false;
        res.socket?.destroy();
        return;
      }
      return send(res, 201, pull);
    }
    return send(res, 405, { message: 'Method Not Allowed' });
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    authorizations,
    requests,
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

function validationFailed(error: Record<string, string>): unknown {
  return { message: 'Validation Failed', errors: [error], documentation_url: 'https://docs.github.com/rest/pulls/pulls#create-a-pull-request' };
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
