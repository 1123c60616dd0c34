/**
 * A flaky HTTP proxy in front of the platform's git server: the workspace remote as the agents and
 * the sequencer see it. Repositories are served as `<proxy>/chaos/<repo>.git`, the owner/name form
 * a GitHub URL has, and forwarded to `<git server>/<repo>.git`. The proxy lives in the harness, so
 * it outlives a killed platform (like a real git host); while the platform is down it answers 502.
 *
 * Faults hit the sequencer's fetches and pushes (isomorphic-git); the test runner's clones (git
 * CLI) pass untouched, their faults are injected at the runner port. Each request may get: a 502
 * or 503 before it reaches the server, a connection reset before it does, a reset after the server
 * applied a push (the push happened, the client does not know), or a hold long enough for the
 * worker's lease to run out.
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GIT_SLOW_MS, type FaultRates } from './config';
import type { FaultLog } from './fault-log';
import type { Random } from './random';

export const REPO_OWNER = 'chaos';

export interface GitProxy {
  readonly url: string;
  /** `<proxy>/chaos/<repo>.git` */
  repoUrl(repo: string): string;
  /** Where requests go (the platform's git server, whose port survives restarts). */
  setUpstream(url: string): void;
  close(): Promise<void>;
}

export async function startGitProxy(options: { rng: Random; rates: FaultRates; log: FaultLog }): Promise<GitProxy> {
  const { rng, rates, log } = options;
  let upstream: URL | undefined;
  const server: Server = createServer((req, res) => {
    const target = upstreamPath(req.url ?? '/');
    if (!upstream || target === undefined) {
      res.writeHead(upstream ? 404 : 502).end();
      return;
    }
    // The git CLI names itself (`git/2.x`); isomorphic-git sends no User-Agent at all.
    const chaotic = !/^git\//.test(String(req.headers['user-agent'] ?? ''));
    const push = req.method === 'POST' && target.includes('/git-receive-pack');
    const fault = chaotic ? chooseFault(rng, rates, push) : undefined;
    if (fault) log.record(`git.${fault}`, `${req.method} ${target}`);
    if (fault === 'reset') {
      req.socket.destroy();
      return;
    }
    if (fault === '5xx') {
      req.resume();
      res.writeHead(rng.chance(0.5) ? 502 : 503, { 'Content-Type': 'text/plain' }).end('chaos: bad gateway');
      return;
    }
    const forward = () => forwardRequest(upstream as URL, target, req, res, fault === 'reset-after-push');
    if (fault === 'slow') setTimeout(forward, GIT_SLOW_MS).unref();
    else forward();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    repoUrl: (repo) => `${url}/${REPO_OWNER}/${repo}.git`,
    setUpstream: (next) => {
      upstream = new URL(next);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type GitFault = '5xx' | 'reset' | 'reset-after-push' | 'slow';

function chooseFault(rng: Random, rates: FaultRates, push: boolean): GitFault | undefined {
  if (rng.chance(rates.git5xx)) return '5xx';
  if (rng.chance(rates.gitReset)) return 'reset';
  if (push && rng.chance(rates.gitResetAfterPush)) return 'reset-after-push';
  if (rng.chance(rates.gitSlow)) return 'slow';
  return undefined;
}

/** `/chaos/<repo>.git/...` -> `/<repo>.git/...`; anything else is not served. */
function upstreamPath(url: string): string | undefined {
  const prefix = `/${REPO_OWNER}/`;
  return url.startsWith(prefix) ? `/${url.slice(prefix.length)}` : undefined;
}

function forwardRequest(
  upstream: URL,
  path: string,
  req: IncomingMessage,
  res: ServerResponse,
  dropAnswer: boolean,
): void {
  const outgoing = request(
    {
      host: upstream.hostname,
      port: upstream.port,
      path,
      method: req.method,
      headers: { ...req.headers, host: upstream.host },
    },
    (answer) => {
      if (dropAnswer) {
        // The server has the whole push and answers; the client never hears it.
        answer.resume();
        answer.once('end', () => req.socket.destroy());
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  outgoing.once('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'Content-Type': 'text/plain' }).end('chaos proxy: upstream unreachable');
    else res.destroy();
  });
  req.pipe(outgoing);
}
