/**
 * A GitHub App as the platform's credential: installation tokens minted by @octokit/auth-app
 * against a loopback GitHub (GitHub has no local stand-in: test/support/fake-github.ts checks the
 * app's JWT with its public key and mints tokens that expire an hour later), cached until shortly
 * before they expire, and used for open_pr's REST calls and for the sequencer's push to the
 * loopback git server, which accepts exactly the tokens GitHub minted and has not seen expire.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Octokit } from '@octokit/core';
import { IsomorphicGitWorkspace } from '../../src/adapters/git';
import { GitHubLimits, type GitHubAppKey } from '../../src/adapters/github-api';
import {
  appTokensAt,
  appTokensCache,
  CHECKOUT_MARGIN_MS,
  gitAuthFor,
  GitHubAppTokens,
  INSTALLATION_TOKEN_USER,
  REFRESH_MARGIN_MS,
  restTokenFor,
} from '../../src/adapters/github-app';
import { GitHubPullRequestHost } from '../../src/adapters/github-pr-host';
import { parseGitCredentials, parseGithubToken } from '../../src/adapters/secrets';
import { ConfigurationError, PermanentJobError, RetryAfterError } from '../../src/core/errors';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import { startFakeGitHub, type FakeGitHub } from '../support/fake-github';
import { createRepo, git, tempDir } from '../support/git-fixtures';

const { privateKey, publicKey } = generateKeyPairSync('rsa', {
  modulusLength: 2048,
  privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  publicKeyEncoding: { type: 'spki', format: 'pem' },
});
const APP_ID = '4242';
const INSTALLATION = 77;
const PERMISSIONS = { contents: 'write', pull_requests: 'write', metadata: 'read' };
const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

describe('a GitHub App (auth-app against a loopback GitHub)', () => {
  let now: number;
  let github: FakeGitHub;
  const clock = { now: () => now };

  beforeEach(async () => {
    now = Date.parse('2026-12-01T10:00:00Z');
    github = await startFakeGitHub({
      app: {
        appId: APP_ID,
        publicKey,
        installations: { acme: { id: INSTALLATION, permissions: PERMISSIONS } },
        now: clock.now,
      },
    });
  });
  afterEach(() => github.close());

  const tokensFor = (app: Partial<GitHubAppKey> = {}) =>
    new GitHubAppTokens({
      app: { appId: APP_ID, privateKey, installationId: INSTALLATION, ...app },
      baseUrl: github.url,
      clock,
      limits: new GitHubLimits({ clock }),
    });
  const acme = { owner: 'acme', repo: 'widgets' };

  it('mints an installation token, serves it from the cache, and mints the next one shortly before it expires', async () => {
    const tokens = tokensFor();

    const first = await tokens.token(acme);
    expect(await tokens.token({ owner: 'acme', repo: 'gadgets' })).toBe(first);
    now += 3_600_000 - REFRESH_MARGIN_MS - 1;
    expect(await tokens.token(acme)).toBe(first);
    now += 2;
    const second = await tokens.token(acme);

    expect(github.minted.map((m) => m.token)).toEqual([first, second]);
    expect(second).not.toBe(first);
    expect(github.minted.every((m) => m.installationId === INSTALLATION)).toBe(true);
  });

  it("finds the installation of the repository's owner when the secret names none, once per owner", async () => {
    const tokens = tokensFor({ installationId: undefined });

    await tokens.token(acme);
    await tokens.token({ owner: 'acme', repo: 'gadgets' });

    expect(github.requests.filter((r) => r.path.endsWith('/installation')).map((r) => r.path)).toEqual([
      '/repos/acme/widgets/installation',
    ]);
    expect(github.minted).toHaveLength(1);
  });

  it('refuses a repository whose owner has not installed the app, naming the app and the repository', async () => {
    const error = await tokensFor({ installationId: undefined })
      .token({ owner: 'elsewhere', repo: 'widgets' })
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PermanentJobError);
    expect(error).toMatchObject({
      reason: 'REJECTED_BY_TARGET',
      message: expect.stringContaining(`app ${APP_ID} on elsewhere/widgets`),
    });
  });

  it('a rate-limited mint is a wait for the time GitHub names, and no second request goes out before it', async () => {
    github.failNext('POST', 403, { message: 'You have exceeded a secondary rate limit.' }, { 'retry-after': '30' });
    const tokens = tokensFor();

    const error = await tokens.token(acme).catch((e: unknown) => e);
    const again = await tokens.token(acme).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(RetryAfterError);
    expect(error).toMatchObject({ limit: 'github-rate-limit', retryAt: now + 30_000 });
    expect(again).toBeInstanceOf(RetryAfterError);
    expect(github.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
  });

  it("opens a pull request with the installation token of the repository's installation", async () => {
    const secret = parseGithubToken(
      JSON.stringify({ appId: Number(APP_ID), privateKey, installationId: INSTALLATION }),
      'the token secret',
    );
    const tokensOf = appTokensAt({ baseUrl: github.url, clock });
    const host = new GitHubPullRequestHost(
      async (repository) =>
        new Octokit({ auth: await restTokenFor(repository, secret, tokensOf), baseUrl: github.url, log: silent }),
      { clock },
    );

    const pull = await host.findOrCreate({
      repoUrl: 'https://github.example/acme/widgets.git',
      head: 'agent/ws-1',
      base: 'main',
      title: 'Agent work',
    });

    expect(pull).toMatchObject({ number: 1, created: true });
    const [token] = github.minted;
    const restCalls = github.requests.flatMap((r, i) =>
      r.path.startsWith('/repos/acme/widgets/pulls') ? [github.authorizations[i]] : [],
    );
    expect(restCalls).toEqual([`token ${token?.token}`, `token ${token?.token}`]);
  });

  describe('git over HTTPS', () => {
    let root: string;
    let server: GitServer;
    let repoUrl: string;

    beforeEach(async () => {
      root = await tempDir('github-app');
      // A host that takes exactly the installation tokens GitHub minted, as GitHub's git does.
      server = await startGitServer({
        root: join(root, 'remotes'),
        access: {
          permission: (c) =>
            c?.username === INSTALLATION_TOKEN_USER && github.validToken(c.password) ? 'write' : 'none',
        },
      });
      const src = join(root, 'src');
      await mkdir(src);
      await createRepo(src, { 'README.md': 'widgets\n' });
      await mkdir(join(root, 'remotes', 'acme'), { recursive: true });
      await git(root, 'clone', '--quiet', '--bare', src, join(root, 'remotes', 'acme', 'widgets.git'));
      repoUrl = `${server.url}/acme/widgets.git`;
    });
    afterEach(async () => {
      await server.close();
      await rm(root, { recursive: true, force: true });
    });

    it('pushes with an installation token, and with the next one once the first is near its expiry', async () => {
      const secret = parseGitCredentials(
        JSON.stringify({ appId: APP_ID, privateKey, installationId: INSTALLATION }),
        'the git secret',
      );
      const tokensOf = appTokensAt({ baseUrl: github.url, clock });
      const workspace = new IsomorphicGitWorkspace({
        credentials: (url) => gitAuthFor(url, secret, tokensOf),
        workRoot: join(root, 'work'),
      });
      const commit = (file: string) =>
        workspace.commitPatch({
          repoUrl,
          branch: 'main',
          diff: `diff --git a/${file} b/${file}\nnew file mode 100644\n--- /dev/null\n+++ b/${file}\n@@ -0,0 +1 @@\n+${file}\n`,
          jobId: `job-${file}`,
          message: `add ${file}`,
          createdAt: new Date(now).toISOString(),
        });

      const first = await commit('one.txt');
      now += 3_600_000 - REFRESH_MARGIN_MS + 1;
      const second = await commit('two.txt');

      const remote = join(root, 'remotes', 'acme', 'widgets.git');
      expect(await git(remote, 'log', '--format=%H', '-2', 'main')).toBe(`${second.commitSha}\n${first.commitSha}`);
      expect(github.minted).toHaveLength(2);
      // The first token has expired for the host now: only the fresh one could have pushed.
      now += REFRESH_MARGIN_MS;
      expect(github.validToken(github.minted[0]!.token)).toBe(false);
    });

    it("a test build's checkout token reads its one repository and nothing else: GitHub is asked for contents: read on it, and the host refuses its push", async () => {
      // acme's repositories, one level deep as the loopback server names them (its access sees the name).
      const remotes = join(root, 'acme');
      for (const name of ['widgets', 'gadgets'])
        await git(
          root,
          'clone',
          '--quiet',
          '--bare',
          join(root, 'remotes', 'acme', 'widgets.git'),
          join(remotes, `${name}.git`),
        );
      const scoped = await startGitServer({
        root: remotes,
        access: {
          permission: (c, repo) =>
            c?.username === INSTALLATION_TOKEN_USER ? github.gitPermission(c.password, 'acme', repo) : 'none',
        },
      });
      const url = (token: string, name: string) =>
        `${scoped.url.replace('://', `://${INSTALLATION_TOKEN_USER}:${token}@`)}/${name}.git`;
      try {
        const tokens = tokensFor();

        const checkout = await tokens.checkoutToken(acme);

        expect(github.minted).toEqual([
          expect.objectContaining({
            token: checkout.token,
            installationId: INSTALLATION,
            repositories: ['widgets'],
            permissions: { contents: 'read' },
          }),
        ]);
        const clone = join(root, 'checkout');
        await git(root, 'clone', '--quiet', url(checkout.token, 'widgets'), clone);
        expect(await git(clone, 'log', '--format=%s', '-1')).toBe(
          await git(join(remotes, 'widgets.git'), 'log', '--format=%s', '-1'),
        );
        await git(clone, 'commit', '--quiet', '--allow-empty', '-m', 'from the tests');
        await expect(git(clone, 'push', '--quiet', 'origin', 'HEAD:main')).rejects.toThrow(/403|read-only/);
        await expect(git(root, 'ls-remote', url(checkout.token, 'gadgets'))).rejects.toThrow(
          /401|Authentication failed|could not read/,
        );
        // The platform's own token for the installation still pushes: the checkout token is another one.
        expect(await tokens.token(acme)).not.toBe(checkout.token);
      } finally {
        await scoped.close();
      }
    });

    it('keeps a checkout token per repository while it has CHECKOUT_MARGIN_MS to live, then mints the next', async () => {
      const tokens = tokensFor();

      const first = await tokens.checkoutToken(acme);
      const other = await tokens.checkoutToken({ owner: 'acme', repo: 'gadgets' });
      now += 3_600_000 - CHECKOUT_MARGIN_MS - 1;
      expect(await tokens.checkoutToken({ owner: 'ACME', repo: 'Widgets' })).toEqual(first);
      now += 2;
      const next = await tokens.checkoutToken(acme);

      expect(github.minted.map((m) => [m.token, m.repositories])).toEqual([
        [first.token, ['widgets']],
        [other.token, ['gadgets']],
        [next.token, ['widgets']],
      ]);
      expect(next.expiresAt).toBe(now + 3_600_000);
    });

    it('a wrong key is refused by GitHub before any git request', async () => {
      const other = generateKeyPairSync('rsa', {
        modulusLength: 2048,
        privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
        publicKeyEncoding: { type: 'spki', format: 'pem' },
      });
      const tokensOf = appTokensCache(() => tokensFor({ privateKey: other.privateKey }));
      const workspace = new IsomorphicGitWorkspace({
        credentials: (url) =>
          gitAuthFor(url, { appId: APP_ID, privateKey: other.privateKey, installationId: INSTALLATION }, tokensOf),
        workRoot: join(root, 'work'),
      });

      await expect(workspace.branchHead(repoUrl, 'main')).rejects.toThrow(
        /GitHub App: could not mint an installation token of installation 77/,
      );
      expect(github.minted).toEqual([]);
    });
  });
});

describe('GitHub App secrets', () => {
  const app = { appId: 4242, privateKey, installationId: 7 };

  it('reads an app from the git or the token secret, the app id as a number or a string', () => {
    expect(parseGitCredentials(JSON.stringify(app), 's')).toEqual({ appId: '4242', privateKey, installationId: 7 });
    expect(parseGithubToken(JSON.stringify({ ...app, appId: '4242', installationId: undefined }), 's')).toEqual({
      appId: '4242',
      privateKey,
    });
  });

  it('names what an app secret lacks, never its key; the read-only secret takes an app too (builds get checkout tokens from it)', () => {
    const broken = () =>
      parseGitCredentials(JSON.stringify({ appId: 4242, privateKey: 'not a key, secret-ish' }), 'arn:git');
    expect(broken).toThrow(ConfigurationError);
    expect(broken).toThrow(/secret arn:git is malformed: privateKey: must be the PEM private key/);
    expect(broken).not.toThrow(/secret-ish/);
    expect(parseGitCredentials(JSON.stringify(app), 'arn:read')).toEqual({
      appId: '4242',
      privateKey,
      installationId: 7,
    });
    expect(() => parseGitCredentials(JSON.stringify({ appId: 4242 }), 'arn:read')).toThrow(
      /secret arn:read is malformed: privateKey/,
    );
  });
});
