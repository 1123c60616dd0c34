/**
 * A loopback smart-HTTP git server for the local platform and the tests: a small node:http server
 * that runs git's own `git http-backend` as a CGI program over bare repositories under `root`.
 * No npm package: the protocol, pack negotiation and ref locking are git's, so pushes and fetches
 * behave as they do against a real host (including the compare-and-swap on a ref update).
 * Every request is checked against an access policy first (git-access.ts): the platform's server
 * lets only its own credential push and a test run's checkout fetch its one repository.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { OPEN_ACCESS, singleCredential, type GitAccess, type GitCredentials } from './git-access';
import { REPO_NAME } from './state-dir';

const run = promisify(execFile);
const LOOPBACK = '127.0.0.1';
const HTTP_BACKEND = process.env.GIT_HTTP_BACKEND ?? '/usr/lib/git-core/git-http-backend';

export interface GitServerOptions {
  /** Directory holding the bare repositories (`<name>.git`). */
  readonly root: string;
  /** @default 0 (a free port) */
  readonly port?: number;
  /** Who may fetch and push which repository (tools/local/git-access.ts). @default OPEN_ACCESS, or `auth` */
  readonly access?: GitAccess;
  /** Shorthand for an access where these HTTP basic credentials may do everything and nothing else may. */
  readonly auth?: GitCredentials;
  /**
   * Whether upload-pack sends objects by id with filters (partial clones), as GitHub does; off, a
   * fetch gets whole branches only, as from a server that does not offer it. @default true
   */
  readonly filters?: boolean;
}

export interface GitServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** Clone URL of the bare repository `<root>/<name>.git`. */
  repoUrl(name: string): string;
  /** The repository name of a clone URL of this server, or undefined for any other URL. */
  repoNameOf(repoUrl: string): string | undefined;
  /** Creates an empty bare repository, or a bare copy of `fromDir` (all branches). Returns its git dir. */
  createBareRepo(name: string, options?: { fromDir?: string; initialBranch?: string }): Promise<string>;
  /** A bare copy of the local repository `srcDir` (all branches). Returns its git dir. */
  importRepository(srcDir: string, name: string): Promise<string>;
  /**
   * Imports the branches of `srcDir` that repository `name` lacks; the ones it has stay as they are
   * (they may carry the platform's commits). Returns the branches added and those kept.
   */
  importNewBranches(srcDir: string, name: string): Promise<{ readonly added: string[]; readonly kept: string[] }>;
  /** Git dir of a repository under root. */
  gitDir(name: string): string;
  /** Stops listening and ends every running `git http-backend`. */
  close(): Promise<void>;
}

/** The branch names of a repository (`git <location> for-each-ref refs/heads`). */
async function branchesOf(location: readonly string[]): Promise<string[]> {
  const { stdout } = await run('git', [...location, 'for-each-ref', '--format=%(refname:lstrip=2)', 'refs/heads']);
  return stdout.split('\n').filter(Boolean);
}

export class InvalidRepositoryNameError extends Error {
  override readonly name = 'InvalidRepositoryNameError';
}

export async function startGitServer(options: GitServerOptions): Promise<GitServer> {
  const { root } = options;
  await mkdir(root, { recursive: true });
  const children = new Set<ChildProcess>();
  const access = options.access ?? (options.auth ? singleCredential(options.auth) : OPEN_ACCESS);
  const server = createServer((req, res) => {
    const request = gitRequest(req);
    if (!request) {
      res.writeHead(400, { 'Content-Type': 'text/plain' }).end('malformed path');
      return;
    }
    const credentials = basicCredentials(req);
    const permission = access.permission(credentials, request.repo);
    // 401: no credential this repository knows (as a host answers a wrong token); 403: a read-only one pushing.
    if (permission === 'none') {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="agent-jobs"' }).end();
      return;
    }
    if (request.push && permission !== 'write') {
      res.writeHead(403, { 'Content-Type': 'text/plain' }).end('read-only access: no push');
      return;
    }
    serveCgi(root, req, res, children, {
      ...request,
      user: credentials?.username || 'agent-jobs',
      receivePack: permission === 'write',
      filters: options.filters ?? true,
    });
  });
  // Longer than a client keeps an idle connection (Node's global agent: 5 s, as this server's
  // default), so the client drops it first: at equal timeouts a request sent on a connection the
  // server is closing fails with ECONNRESET.
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, LOOPBACK, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${LOOPBACK}:${port}`;
  const gitDir = (name: string): string => {
    if (!REPO_NAME.test(name) || name.endsWith('.git'))
      throw new InvalidRepositoryNameError(`invalid repository name: ${JSON.stringify(name)}`);
    return join(root, `${name}.git`);
  };
  const importRepository = async (srcDir: string, name: string): Promise<string> => {
    const dir = gitDir(name);
    // A bare clone keeps every branch of the source as a branch (refs/heads/*).
    await run('git', ['clone', '--quiet', '--bare', '--no-local', srcDir, dir]);
    return dir;
  };
  const importNewBranches = async (srcDir: string, name: string) => {
    const dir = gitDir(name);
    const [source, here] = await Promise.all([branchesOf(['-C', srcDir]), branchesOf(['--git-dir', dir])]);
    const added = source.filter((branch) => !here.includes(branch));
    const kept = source.filter((branch) => here.includes(branch));
    // No `+`: a ref that exists is never moved; only new ones are created.
    if (added.length > 0)
      await run('git', [
        '--git-dir',
        dir,
        'fetch',
        '--quiet',
        '--no-tags',
        srcDir,
        ...added.map((b) => `refs/heads/${b}:refs/heads/${b}`),
      ]);
    return { added, kept };
  };
  return {
    url,
    port,
    importNewBranches,
    repoUrl: (name) => `${url}/${name}.git`,
    repoNameOf(repoUrl) {
      const prefix = `${url}/`;
      const name =
        repoUrl.startsWith(prefix) && repoUrl.endsWith('.git') ? repoUrl.slice(prefix.length, -'.git'.length) : '';
      return REPO_NAME.test(name) ? name : undefined;
    },
    gitDir,
    importRepository,
    async createBareRepo(name, { fromDir, initialBranch = 'main' } = {}) {
      if (fromDir !== undefined) return importRepository(fromDir, name);
      const dir = gitDir(name);
      await run('git', ['init', '--quiet', '--bare', `--initial-branch=${initialBranch}`, dir]);
      return dir;
    },
    async close() {
      const exited = [...children].map((child) => new Promise((resolve) => child.once('close', resolve)));
      for (const child of children) child.kill('SIGKILL');
      await Promise.all(exited);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The credentials of an HTTP basic Authorization header, or undefined without one. */
function basicCredentials(req: IncomingMessage): GitCredentials | undefined {
  const header = req.headers.authorization;
  if (!header?.startsWith('Basic ')) return undefined;
  const decoded = Buffer.from(header.slice('Basic '.length), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

interface GitRequest {
  readonly pathInfo: string;
  readonly query: string;
  /** `<name>` of `/<name>.git/...`, empty when the path names no repository. */
  readonly repo: string;
  /** A push (receive-pack), as opposed to a fetch or a ref listing for one. */
  readonly push: boolean;
}

/** What a smart-HTTP request asks for, or undefined for a path that does not decode. */
function gitRequest(req: IncomingMessage): GitRequest | undefined {
  const requestUrl = new URL(req.url ?? '/', 'http://localhost');
  let pathInfo: string;
  try {
    pathInfo = decodeURIComponent(requestUrl.pathname);
  } catch {
    return undefined;
  }
  const first = pathInfo.split('/')[1] ?? '';
  const repo = first.endsWith('.git') ? first.slice(0, -'.git'.length) : '';
  const push = pathInfo.endsWith('/git-receive-pack') || requestUrl.searchParams.get('service') === 'git-receive-pack';
  return { pathInfo, query: requestUrl.search.slice(1), repo, push };
}

/** Runs one request through `git http-backend` (CGI/1.1), streaming both bodies. */
function serveCgi(
  root: string,
  req: IncomingMessage,
  res: ServerResponse,
  children: Set<ChildProcess>,
  request: GitRequest & { user: string; receivePack: boolean; filters: boolean },
): void {
  const config: Record<string, string> = {
    // Pushes only for a caller allowed to write: git's own check, behind the one above.
    'http.receivepack': String(request.receivePack),
    // Partial clones: filters, and wants of any object by id (protocol v2 allows those anyway;
    // these two say so for v0 and v1 as well). The protocol version comes from the client's
    // Git-Protocol header (GIT_PROTOCOL below): without it, upload-pack speaks v0.
    'uploadpack.allowFilter': String(request.filters),
    'uploadpack.allowAnySHA1InWant': String(request.filters),
    'uploadpack.allowReachableSHA1InWant': String(request.filters),
  };
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: '1',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_COUNT: String(Object.keys(config).length),
    ...Object.fromEntries(
      Object.entries(config).flatMap(([key, value], i) => [
        [`GIT_CONFIG_KEY_${i}`, key],
        [`GIT_CONFIG_VALUE_${i}`, value],
      ]),
    ),
    REQUEST_METHOD: req.method ?? 'GET',
    PATH_INFO: request.pathInfo,
    QUERY_STRING: request.query,
    CONTENT_TYPE: req.headers['content-type'] ?? '',
    REMOTE_USER: request.user,
    REMOTE_ADDR: req.socket.remoteAddress ?? LOOPBACK,
    SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
    GATEWAY_INTERFACE: 'CGI/1.1',
  };
  if (req.headers['content-length'] !== undefined) env.CONTENT_LENGTH = req.headers['content-length'];
  if (req.headers['content-encoding'] !== undefined) env.HTTP_CONTENT_ENCODING = req.headers['content-encoding'];
  const protocol = req.headers['git-protocol'];
  if (typeof protocol === 'string') env.GIT_PROTOCOL = protocol;

  const child = spawn(HTTP_BACKEND, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(child);
  child.once('close', () => children.delete(child));
  const fail = (status: number, message: string) => {
    if (!res.headersSent) res.writeHead(status, { 'Content-Type': 'text/plain' }).end(message);
    else res.destroy();
  };
  child.once('error', (error) => fail(500, `git http-backend failed to start: ${error.message}`));
  child.stderr.resume();
  req.pipe(child.stdin);
  child.stdin.on('error', () => undefined); // the backend may exit before reading everything
  // A client that goes away mid-request must not leave the backend waiting on its stdin.
  res.on('close', () => {
    if (!res.writableFinished) child.kill('SIGKILL');
  });

  let head = Buffer.alloc(0);
  const onHeaderData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const end = headerEnd(head);
    if (end === undefined) return;
    child.stdout.off('data', onHeaderData);
    const { status, headers } = parseCgiHeaders(head.subarray(0, end.index).toString('latin1'));
    res.writeHead(status, headers);
    res.write(head.subarray(end.index + end.length));
    child.stdout.pipe(res);
  };
  child.stdout.on('data', onHeaderData);
  child.stdout.once('end', () => {
    if (!res.headersSent) fail(502, 'git http-backend sent no CGI headers');
  });
}

function headerEnd(buffer: Buffer): { index: number; length: number } | undefined {
  const crlf = buffer.indexOf('\r\n\r\n');
  const lf = buffer.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return { index: crlf, length: 4 };
  return lf >= 0 ? { index: lf, length: 2 } : undefined;
}

function parseCgiHeaders(text: string): { status: number; headers: Record<string, string> } {
  let status = 200;
  const headers: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10) || 500;
    else headers[name] = value;
  }
  return { status, headers };
}
