/**
 * The TLS front of the assembly run: the public HTTPS hosts the functions dial by name (GitHub's
 * API at api.github.com, the git host at github.com) served on one loopback port with one
 * certificate for every name, made with openssl for the run and trusted by the functions through
 * NODE_EXTRA_CA_CERTS (lambda-service.ts). Each request goes, by its Host header, to the plain
 * HTTP server behind that name, its path mapped where the server names things differently
 * (GitHub's `/<owner>/<repo>.git` on the loopback git server's one-segment repositories: see the
 * test). Bodies stream both ways, so a push of any size passes as it would.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface TlsRoute {
  /** The name the functions dial, and the certificate's name for it. */
  readonly hostname: string;
  /** Loopback port of the plain HTTP server behind that name. */
  readonly upstreamPort: number;
  /** The upstream path of a request's path; the same path when absent. */
  readonly path?: (path: string) => string;
}

export interface TlsFront {
  readonly port: number;
  /** PEM of the certificate, in a file (what NODE_EXTRA_CA_CERTS names). */
  readonly certFile: string;
  close(): Promise<void>;
}

export async function startTlsFront(routes: readonly TlsRoute[], dir: string): Promise<TlsFront> {
  const keyFile = join(dir, 'tls-front.key');
  const certFile = join(dir, 'tls-front.pem');
  const names = routes.map((r) => `DNS:${r.hostname}`).join(',');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '1',
      '-subj',
      `/CN=${routes[0]!.hostname}`,
      '-addext',
      `subjectAltName=${names}`,
    ],
    { stdio: 'ignore' },
  );
  const server = createServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (req, res) => {
    const hostname = String(req.headers.host ?? '').replace(/:\d+$/, '');
    const route = routes.find((r) => r.hostname === hostname);
    if (!route) {
      res.writeHead(421, { 'content-type': 'text/plain' }).end(`the run's TLS front serves no host ${hostname}`);
      return;
    }
    const path = route.path ? route.path(req.url ?? '/') : (req.url ?? '/');
    const upstream = request(
      { host: '127.0.0.1', port: route.upstreamPort, method: req.method, path, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    certFile,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
