/**
 * A TLS front for a loopback stand-in that the functions reach by a public name over HTTPS (GitHub
 * at api.github.com, the template's default): a certificate for that name, made with openssl for
 * the run, and a TLS server that hands each connection to the stand-in's plain HTTP port. The
 * functions trust the certificate through NODE_EXTRA_CA_CERTS (lambda-service.ts).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createServer } from 'node:tls';

export interface TlsFront {
  readonly port: number;
  /** PEM of the certificate, in a file (what NODE_EXTRA_CA_CERTS names). */
  readonly certFile: string;
  close(): Promise<void>;
}

export async function startTlsFront(hostname: string, upstreamPort: number, dir: string): Promise<TlsFront> {
  const keyFile = join(dir, 'tls-front.key');
  const certFile = join(dir, 'tls-front.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', `/CN=${hostname}`, '-addext', `subjectAltName=DNS:${hostname}`], { stdio: 'ignore' });
  const server = createServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (socket) => {
    const upstream = connect(upstreamPort, '127.0.0.1');
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, certFile, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
