/**
 * Hostile input, trust side: the git hosts the sequencer may dial. A job naming a repository on a
 * host outside the configured allow-list (or on a loopback, link-local or metadata address, where
 * the policy is AWS's) is refused on its first delivery as HOST_NOT_ALLOWED, before its workspace
 * turn: nothing is dialled, the workspace is neither bound nor blocked, and the next job with an
 * allowed repository runs. The AWS policy is emulated here by giving the real sequencer the policy
 * the AWS composition builds from GIT_HOSTS (awsGitHostPolicy); no AWS network is involved.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { awsGitHostPolicy, type GitHostPolicy } from '../../contract/git-remotes';
import { ownGitServerPolicy } from '../../src/compose/local';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import { createRepo, git, removeDir, tempDir } from '../support/git-fixtures';
import { withTrustHarness, type Workspace } from './trust-harness';

/** The policy of the case running: the platform's own server unless the case says otherwise. */
let policyOf: (server: GitServer) => GitHostPolicy;

describe('git hosts allow-list (trust side)', () => {
  const h = withTrustHarness({ gitHosts: (server) => policyOf(server) });
  let foreignRoot: string;
  let foreign: GitServer;
  let foreignRepo: { url: string; gitDir: string };

  beforeAll(async () => {
    // Another git server on this machine (another loopback port): reachable, but not the platform's.
    foreignRoot = await tempDir('hostile-foreign');
    foreign = await startGitServer({ root: join(foreignRoot, 'remotes') });
    const src = join(foreignRoot, 'src');
    await mkdir(src);
    await createRepo(src, { 'README.md': 'foreign\n' });
    await git(src, 'branch', 'agent/foreign');
    foreignRepo = { url: foreign.repoUrl('foreign'), gitDir: await foreign.importRepository(src, 'foreign') };
  });

  afterAll(async () => {
    await foreign?.close();
    if (foreignRoot) await removeDir(foreignRoot);
  });

  beforeEach(() => {
    policyOf = (server) => ownGitServerPolicy(server.url);
  });

  /** Sends `job`, delivers it once, and checks the refusal an operator sees: first delivery, DLQ, no binding, no fence. */
  async function expectRefused(ws: Workspace, repo: { url: string; branch: string }, reason: RegExp): Promise<void> {
    const job = h().patchJob(ws, 'anywhere.txt', { repo });
    await h().send(job);
    expect(await h().deliverOnce('agent-jobs')).toEqual({ acknowledged: true });
    expect(await h().getJob(job.jobId)).toMatchObject({
      status: 'FAILED',
      attempt: 1,
      error: { reason: 'HOST_NOT_ALLOWED', message: expect.stringMatching(reason) },
    });
    expect((await h().deadLetters('agent-jobs')).map((d) => d.reason)).toEqual(['HOST_NOT_ALLOWED']);
    expect((await h().getWorkspace(ws.workspaceId))?.repo).toBeUndefined();
    expect(h().events.filter((e) => e.type === 'WorkspaceBlocked')).toEqual([]);
  }

  /** The documented recovery: the workspace takes a job naming an allowed repository. */
  async function expectUsable(ws: Workspace): Promise<void> {
    policyOf = (server) => ownGitServerPolicy(server.url);
    const next = h().patchJob(ws, 'allowed.txt');
    await h().send(next);
    await h().drive('agent-jobs');
    expect(await h().getJob(next.jobId)).toMatchObject({ status: 'SUCCEEDED' });
  }

  it('locally, refuses a repository on another git server of this machine; that remote is unchanged', async () => {
    const ws = await h().workspace();
    const before = await git(foreignRepo.gitDir, 'for-each-ref', '--format=%(refname) %(objectname)');

    await expectRefused(
      ws,
      { url: foreignRepo.url, branch: 'agent/foreign' },
      /host 127\.0\.0\.1:\d+ is not in the configured git hosts \(127\.0\.0\.1:\d+\)/,
    );

    expect(await git(foreignRepo.gitDir, 'for-each-ref', '--format=%(refname) %(objectname)')).toBe(before);
    await expectUsable(ws);
  });

  it('on AWS with no git host configured (emulated policy), refuses every repository and says how to configure one', async () => {
    policyOf = () => awsGitHostPolicy(undefined);
    const ws = await h().workspace();
    await expectRefused(
      ws,
      { url: 'https://github.com/org/repo.git', branch: ws.branch },
      /host github\.com is not allowed: no git hosts are configured \(set gitHosts in the deployment configuration\)/,
    );
    await expectUsable(ws);
  });

  it.each([
    [
      'the git server itself, listed',
      (server: GitServer) => server.repoUrl('x'),
      /127\.0\.0\.1 is a loopback, link-local or metadata address: the platform never dials one/,
    ],
    [
      'the instance metadata address',
      () => 'http://169.254.169.254/latest/meta-data.git',
      /169\.254\.169\.254 is a loopback, link-local or metadata address/,
    ],
    [
      'loopback spelled as a number',
      (server: GitServer) => `http://2130706433:${server.port}/x.git`,
      /127\.0\.0\.1 is a loopback/,
    ],
    [
      'localhost',
      (server: GitServer) => `http://localhost:${server.port}/x.git`,
      /localhost names loopback or a metadata service/,
    ],
  ])(
    'on AWS (emulated policy), never dials %s, even when its host is on the allow-list',
    async (_label, urlOf, reason) => {
      policyOf = (server) => awsGitHostPolicy(new URL(urlOf(server)).host);
      const ws = await h().workspace();
      await expectRefused(ws, { url: urlOf(h().git), branch: ws.branch }, reason);
      await expectUsable(ws);
    },
  );

  it('refuses to pin a staged job of a workspace whose host has left the allow-list; the workspace is not blocked', async () => {
    const ws = await h().workspace();
    const bind = h().patchJob(ws, 'bound.txt');
    await h().send(bind);
    await h().drive('agent-jobs');
    expect(await h().getJob(bind.jobId)).toMatchObject({ status: 'SUCCEEDED' });

    policyOf = () => awsGitHostPolicy('github.com');
    const tests = h().job(ws, 'run_tests', { command: 'true' });
    await h().send(tests);
    expect(await h().deliverOnce('agent-jobs')).toEqual({ acknowledged: true });

    expect(await h().getJob(tests.jobId)).toMatchObject({
      status: 'FAILED',
      error: { reason: 'HOST_NOT_ALLOWED', message: expect.stringContaining('is a loopback') },
    });
    expect(await h().getJob(tests.jobId)).not.toHaveProperty('pin');
    expect(await h().getWorkspace(ws.workspaceId)).toMatchObject({ state: 'ACTIVE' });
    await h().deadLetters('agent-jobs');
    await expectUsable(ws);
  });
});
