/**
 * The sequencer's HTTP client on AWS (src/adapters/git/host-guard.ts) against real loopback HTTP
 * servers: a listed name whose DNS answers a loopback or metadata address is never connected to,
 * and a redirect is never followed. DNS is stood in for by the lookup the client is given (names
 * are mapped to 127.0.0.1 without a resolver), the connections are real.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, LookupFunction } from 'node:net';
import nodeHttp from 'isomorphic-git/http/node';
import { remoteBranchHead, remoteOptions } from '../../src/adapters/git/remote';
import { guardedGitHttp, guardedLookup } from '../../src/adapters/git/host-guard';
import { PermanentJobError } from '../../src/core/errors';

/** A stand-in resolver: every name answers `address` (through the real lookup of that literal). */
const resolvesTo =
  (address: string): LookupFunction =>
  (_hostname, options, callback) =>
    dnsLookup(address, options, callback);

/** A server that counts the requests reaching it and answers each with `answer`. */
async function countingServer(
  answer: (res: import('node:http').ServerResponse) => void,
): Promise<{ server: Server; port: number; hits: () => number }> {
  let hits = 0;
  const server = createServer((_req, res) => {
    hits++;
    answer(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, hits: () => hits };
}

let target: Awaited<ReturnType<typeof countingServer>>;
let redirector: Awaited<ReturnType<typeof countingServer>>;

beforeAll(async () => {
  target = await countingServer((res) => res.writeHead(500).end());
  redirector = await countingServer((res) =>
    res
      .writeHead(301, { Location: `http://127.0.0.1:${target.port}/elsewhere.git/info/refs?service=git-upload-pack` })
      .end(),
  );
});

afterAll(async () => {
  for (const s of [target, redirector]) await new Promise((resolve) => s?.server.close(resolve));
});

test('a name that resolves to loopback is refused as HOST_NOT_ALLOWED before any connection', async () => {
  const url = `http://git.example.test:${target.port}/repo.git`;
  const before = target.hits();

  const refused = remoteBranchHead(
    remoteOptions(url, { username: 'bot', password: 'push-token' }, guardedGitHttp(resolvesTo('127.0.0.1'))),
    'main',
  );

  await expect(refused).rejects.toThrow(PermanentJobError);
  await expect(refused).rejects.toMatchObject({
    reason: 'HOST_NOT_ALLOWED',
    message:
      'git.example.test resolves to 127.0.0.1: 127.0.0.1 is a loopback, link-local or metadata address: the platform never dials one',
  });
  expect(target.hits()).toBe(before);
});

test('the same name through an unguarded client does reach the server (the stand-in resolver is what is dialled)', async () => {
  const before = target.hits();
  const agent = new (await import('node:http')).Agent({ lookup: resolvesTo('127.0.0.1') });
  const http = {
    request: (request: Parameters<typeof nodeHttp.request>[0]) => nodeHttp.request({ ...request, agent }),
  };

  await expect(
    remoteBranchHead(remoteOptions(`http://git.example.test:${target.port}/repo.git`, undefined, http), 'main'),
  ).rejects.toThrow(/HTTP 500/);
  expect(target.hits()).toBeGreaterThan(before);
  agent.destroy();
});

test('a redirect is not followed: it is the host refusing (REJECTED_BY_TARGET), and its target sees nothing', async () => {
  const before = target.hits();
  // An address literal is not looked up (the rule before the job's turn checks literals), so the client reaches the redirecting listener.
  const guarded = guardedGitHttp(resolvesTo('127.0.0.1'));
  const viaLiteral = remoteBranchHead(
    remoteOptions(`http://127.0.0.1:${redirector.port}/repo.git`, undefined, guarded),
    'main',
  );

  await expect(viaLiteral).rejects.toMatchObject({
    reason: 'REJECTED_BY_TARGET',
    message: expect.stringContaining('HTTP 301'),
  });
  expect(redirector.hits()).toBeGreaterThan(0);
  expect(target.hits()).toBe(before);
});

describe('guardedLookup', () => {
  const answer =
    (addresses: LookupAddress[]): LookupFunction =>
    (_hostname, _options, callback) =>
      (callback as (e: null, a: LookupAddress[]) => void)(null, addresses);
  const resolve = (lookup: LookupFunction) =>
    new Promise<{ error: unknown; address: unknown }>((done) =>
      lookup('git.example.com', { all: true }, (error, address) => done({ error, address })),
    );

  it('passes an answer of public addresses through unchanged', async () => {
    const addresses = [
      { address: '140.82.121.4', family: 4 },
      { address: '2606:50c0:8000::154', family: 6 },
    ];
    expect(await resolve(guardedLookup(answer(addresses)))).toEqual({ error: null, address: addresses });
  });

  it.each([
    [
      'the instance metadata address among public ones',
      [
        { address: '140.82.121.4', family: 4 },
        { address: '169.254.169.254', family: 4 },
      ],
      '169.254.169.254',
    ],
    ['EC2 IPv6 metadata', [{ address: 'fd00:ec2::254', family: 6 }], 'fd00:ec2::254'],
    ['IPv4-mapped loopback', [{ address: '::ffff:127.0.0.1', family: 6 }], '::ffff:127.0.0.1'],
  ])('refuses an answer holding %s', async (_label, addresses, refused) => {
    const { error } = await resolve(guardedLookup(answer(addresses)));
    expect(error).toMatchObject({
      reason: 'HOST_NOT_ALLOWED',
      message: expect.stringContaining(`git.example.com resolves to ${refused}`),
    });
  });
});

// Seen in chaos runs: apply_patch jobs on the local platform failed UNEXPECTED_ERROR ("Request timed
// out") when the git host took more than 5 s to answer. isomorphic-git's client used Node's global
// agent, which closes a socket idle for 5 s, and simple-get then gives up.
test("the default client waits for a git host slower than Node's 5-second idle timeout", async () => {
  let requests = 0;
  const server = createServer((_req, res) => {
    requests++;
    // The first answer opens a kept-alive connection; the second is slow, as a busy host's push is.
    setTimeout(() => res.writeHead(500).end(), requests === 1 ? 0 : 6_000);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const remote = remoteOptions(`http://127.0.0.1:${(server.address() as AddressInfo).port}/repo.git`);
    await expect(remoteBranchHead(remote, 'main')).rejects.toThrow(/HTTP 500/);

    await expect(remoteBranchHead(remote, 'main')).rejects.toThrow(/HTTP 500/);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}, 20_000);
