/** The loopback smart-HTTP git server, exercised with the real git CLI and isomorphic-git. */
import { readdir, readFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { applyPatchCommit, resolveBranchHead } from '../../src/adapters/git';
import { PermanentJobError, TransientJobError } from '../../src/core/errors';
import { PlatformGitAccess, type GitCredentials } from '../../tools/local/git-access';
import { InvalidRepositoryNameError, startGitServer, type GitServer } from '../../tools/local/git-server';
import { eventually } from '../support/eventually';
import { commitFiles, createRepo, diffOfEdits, git, removeDir, tempDir, writeFiles } from '../support/git-fixtures';

let root: string;
let sourceDir: string;
let baseSha: string;

beforeAll(async () => {
  root = await tempDir('git-server');
  sourceDir = await tempDir('git-server-src');
  baseSha = await createRepo(sourceDir, { 'README.md': 'hello\n' });
  await git(sourceDir, 'branch', 'feature');
});

afterAll(async () => {
  await Promise.all([root, sourceDir].map(removeDir));
});

describe('startGitServer', () => {
  let server: GitServer;
  beforeAll(async () => {
    server = await startGitServer({ root: join(root, 'open') });
  });
  afterAll(() => server.close());

  test('binds loopback on a free port', () => {
    expect(server.url).toBe(`http://127.0.0.1:${server.port}`);
    expect(server.port).toBeGreaterThan(0);
    expect(server.repoUrl('demo')).toBe(`${server.url}/demo.git`);
  });

  test('serves clone and push to the git CLI, and imports every branch', async () => {
    const gitDir = await server.importRepository(sourceDir, 'imported');
    expect((await git(gitDir, 'for-each-ref', '--format=%(refname)', 'refs/heads')).split('\n')).toEqual([
      'refs/heads/feature',
      'refs/heads/main',
    ]);
    const work = await tempDir('clone');
    try {
      await git(work, 'clone', '--quiet', server.repoUrl('imported'), '.');
      const sha = await commitFiles(work, { 'pushed.txt': 'over http\n' }, 'pushed over http');
      await git(work, 'push', '--quiet', 'origin', 'main');
      expect(await git(gitDir, 'rev-parse', 'main')).toBe(sha);
    } finally {
      await removeDir(work);
    }
  });

  test('creates an empty bare repository that accepts a first push', async () => {
    const gitDir = await server.createBareRepo('empty', { initialBranch: 'trunk' });
    expect(await git(gitDir, 'symbolic-ref', 'HEAD')).toBe('refs/heads/trunk');
    await git(sourceDir, 'push', '--quiet', server.repoUrl('empty'), 'main:trunk');
    expect(await resolveBranchHead(server.repoUrl('empty'), 'trunk')).toBe(baseSha);
  });

  test('answers 400 to a malformed path and keeps serving', async () => {
    expect((await fetch(`${server.url}/%E0%A4%A/info/refs`)).status).toBe(400);
    expect((await fetch(`${server.url}/nothing-here.git/info/refs?service=git-upload-pack`)).status).toBe(404);
  });

  test('refuses repository names that could leave the root', async () => {
    await expect(server.createBareRepo('../escape')).rejects.toBeInstanceOf(InvalidRepositoryNameError);
    await expect(server.importRepository(sourceDir, 'a/b')).rejects.toBeInstanceOf(InvalidRepositoryNameError);
  });

  test('close ends the git http-backend processes of requests still running', async () => {
    const closingRoot = join(root, 'closing');
    const other = await startGitServer({ root: closingRoot });
    await other.importRepository(sourceDir, 'slow');
    // An upload-pack request whose body never ends keeps git http-backend waiting on its stdin.
    const request = httpRequest(`${other.repoUrl('slow')}/git-upload-pack`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-git-upload-pack-request' },
    });
    const ended = new Promise<unknown>((resolve) =>
      request.once('error', resolve).once('response', (res) => res.resume().once('close', resolve)),
    );
    request.write('0032want ');
    await eventually(
      () => backendsServing(closingRoot),
      (pids) => pids.length > 0,
      { what: 'git http-backend to serve the request', intervalMs: 20 },
    );

    await other.close();

    expect(await backendsServing(closingRoot)).toEqual([]);
    await ended;
  });
});

/** Pids of git http-backend processes serving `projectRoot` (read from /proc: Linux). */
async function backendsServing(projectRoot: string): Promise<string[]> {
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
  const serving = await Promise.all(
    pids.map(async (pid) => {
      const environ = await readFile(`/proc/${pid}/environ`, 'latin1').catch(() => '');
      return environ.split('\0').includes(`GIT_PROJECT_ROOT=${projectRoot}`) ? [pid] : [];
    }),
  );
  return serving.flat();
}

describe('credentials', () => {
  let server: GitServer;
  const auth = { username: 'agent', password: 's3cret' };
  beforeAll(async () => {
    server = await startGitServer({ root: join(root, 'auth'), auth });
    await server.importRepository(sourceDir, 'private');
  });
  afterAll(() => server.close());

  const diff = () => diffOfEdits(sourceDir, baseSha, (dir) => writeFiles(dir, { 'README.md': 'hello, auth\n' }));
  const job = async (credentials?: typeof auth) => ({
    repoUrl: server.repoUrl('private'),
    branch: 'main',
    diff: await diff(),
    jobId: 'job-auth',
    message: 'authenticated',
    createdAt: '2026-03-01T12:00:00Z',
    workDir: root,
    ...(credentials && { auth: credentials }),
  });

  test('the adapter authenticates with the credentials it is given', async () => {
    const result = await applyPatchCommit(await job(auth));
    expect(await git(server.gitDir('private'), 'rev-parse', 'main')).toBe(result.commitSha);
  });

  test('missing or wrong credentials are transient (a credential mid-rotation), and never echoed', async () => {
    for (const credentials of [undefined, { username: 'agent', password: 'wrong' }]) {
      const error = await applyPatchCommit(await job(credentials)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TransientJobError);
      expect((error as TransientJobError).message).toMatch(/HTTP 401/);
      expect((error as TransientJobError).message).not.toMatch(/s3cret|wrong/);
    }
  });

  test('a repository the host refuses (404) is REJECTED_BY_TARGET, not retried', async () => {
    const error = await resolveBranchHead(server.repoUrl('missing'), 'main', auth).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentJobError);
    expect((error as PermanentJobError).reason).toBe('REJECTED_BY_TARGET');
    expect((error as PermanentJobError).message).toMatch(/HTTP 404/);
  });
});

describe("the platform's access policy: only its own credential pushes; a read grant fetches one repository until revoked", () => {
  let server: GitServer;
  const access = new PlatformGitAccess();
  beforeAll(async () => {
    server = await startGitServer({ root: join(root, 'platform'), access });
    await server.importRepository(sourceDir, 'mine');
    await server.importRepository(sourceDir, 'theirs');
  });
  afterAll(() => server.close());

  /** The git CLI with a credential sent as a header (as the test runner's checkout does), or none. */
  async function gitAs(
    credentials: GitCredentials | undefined,
    ...args: string[]
  ): Promise<{ ok: boolean; stderr: string }> {
    const header = credentials
      ? [
          '-c',
          `http.extraHeader=Authorization: Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`,
        ]
      : [];
    const dir = await tempDir('git-access');
    try {
      await git(dir, 'init', '--quiet');
      await git(
        dir,
        '-c',
        'user.name=t',
        '-c',
        'user.email=t@example.invalid',
        'commit',
        '--quiet',
        '--allow-empty',
        '-m',
        'pushed',
      );
      await git(dir, ...header, ...args);
      return { ok: true, stderr: '' };
    } catch (error) {
      return { ok: false, stderr: String((error as { stderr?: string }).stderr) };
    } finally {
      await removeDir(dir);
    }
  }
  const fetch = (who: GitCredentials | undefined, repo: string) =>
    gitAs(who, 'fetch', '--quiet', server.repoUrl(repo), 'main');
  const push = (who: GitCredentials | undefined, repo: string, branch = 'pushed') =>
    gitAs(who, 'push', '--quiet', server.repoUrl(repo), `HEAD:refs/heads/${branch}`);

  test('nobody without a credential fetches or pushes', async () => {
    expect(await fetch(undefined, 'mine')).toMatchObject({
      ok: false,
      stderr: expect.stringMatching(/401|Authentication failed|could not read Username/),
    });
    expect(await push(undefined, 'mine')).toMatchObject({ ok: false });
    expect(await git(server.gitDir('mine'), 'for-each-ref', '--format=%(refname)')).not.toContain('refs/heads/pushed');
  });

  test('a read grant fetches its repository only, never pushes, and nothing after it is revoked', async () => {
    const grant = access.grantRead('mine');
    expect(await fetch(grant.auth, 'mine')).toEqual({ ok: true, stderr: '' });
    expect(await fetch(grant.auth, 'theirs')).toMatchObject({ ok: false });
    expect(await push(grant.auth, 'mine', 'main')).toMatchObject({ ok: false, stderr: expect.stringMatching(/403/) });
    expect(await push(grant.auth, 'theirs')).toMatchObject({ ok: false });
    grant.revoke();
    expect(await fetch(grant.auth, 'mine')).toMatchObject({ ok: false });
    expect(await git(server.gitDir('mine'), 'rev-parse', 'main')).toBe(baseSha);
  });

  test("the platform's credential fetches and pushes", async () => {
    expect(await fetch(access.platform, 'theirs')).toEqual({ ok: true, stderr: '' });
    expect(await push(access.platform, 'theirs', 'platform')).toEqual({ ok: true, stderr: '' });
    expect(await git(server.gitDir('theirs'), 'for-each-ref', '--format=%(refname)', 'refs/heads/platform')).toBe(
      'refs/heads/platform',
    );
  });
});

test('a remote answering 503 is a transient error', async () => {
  const unavailable: Server = createServer((_req, res) => res.writeHead(503, 'Service Unavailable').end());
  await new Promise<void>((resolve) => unavailable.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(unavailable.address() as AddressInfo).port}/repo.git`;
    await expect(resolveBranchHead(url, 'main')).rejects.toBeInstanceOf(TransientJobError);
    await expect(resolveBranchHead(url, 'main')).rejects.toThrow(/HTTP 503/);
  } finally {
    unavailable.closeAllConnections();
    await new Promise((resolve) => unavailable.close(resolve));
  }
});
