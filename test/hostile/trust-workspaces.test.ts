/**
 * Hostile input, trust side: a workspace is bound to one repository and branch by its first job.
 * A later job naming another is refused on its first delivery (WORKSPACE_MISMATCH), touches neither
 * remote, and does not block the workspace: nothing reached its tree, so the next job runs (the
 * documented recovery is to send the job to the right workspace, with a new job id).
 */
import { withTrustHarness, type TrustHarness, type Workspace } from './trust-harness';

describe('a workspace is bound to one repository and branch (trust side)', () => {
  const h = withTrustHarness();

  /** A workspace bound to its repository and branch by one applied patch. */
  async function boundWorkspace(): Promise<Workspace> {
    const ws = await h().workspace();
    const first = h().patchJob(ws, 'first.txt');
    await h().send(first);
    await h().drive('agent-jobs');
    expect(await h().getJob(first.jobId)).toMatchObject({ status: 'SUCCEEDED' });
    return ws;
  }

  it.each<[string, (ws: Workspace, other: Workspace) => { url: string; branch: string }]>([
    ['another repository', (_ws, other) => ({ url: other.repoUrl, branch: other.branch })],
    ['another repository with the same branch name', (ws, other) => ({ url: other.repoUrl, branch: ws.branch })],
    ['another branch of its repository', (ws) => ({ url: ws.repoUrl, branch: 'main' })],
  ])(
    'refuses an apply_patch naming %s on the first delivery; both remotes unchanged; the workspace stays ACTIVE and usable',
    async (_label, target) => {
      const ws = await boundWorkspace();
      const other = await h().workspace();
      const before = {
        ws: await h().refs(ws),
        other: await h().refs(other),
        record: await h().getWorkspace(ws.workspaceId),
      };
      const hostile = h().patchJob(ws, 'elsewhere.txt', { repo: target(ws, other) });

      await h().send(hostile);
      expect(await h().deliverOnce('agent-jobs')).toEqual({ acknowledged: true });

      expect(await h().getJob(hostile.jobId)).toMatchObject({
        status: 'FAILED',
        error: {
          reason: 'WORKSPACE_MISMATCH',
          message: expect.stringContaining(`bound to ${ws.repoUrl} branch ${ws.branch}`),
        },
      });
      expect((await h().deadLetters('agent-jobs')).map((d) => d.reason)).toEqual(['WORKSPACE_MISMATCH']);
      expect(await h().refs(ws)).toBe(before.ws);
      expect(await h().refs(other)).toBe(before.other);
      expect(await h().getWorkspace(ws.workspaceId)).toMatchObject({
        state: 'ACTIVE',
        repo: { url: ws.repoUrl, branch: ws.branch },
        head: before.record?.head,
      });
      expect(h().events.filter((e) => e.type === 'WorkspaceBlocked')).toEqual([]);
      await expectUsable(h(), ws);
    },
  );

  it('takes the same repository spelled another way (scheme and host case, default port) as the same binding', async () => {
    const ws = await boundWorkspace();
    const respelled = ws.repoUrl.replace('http://', 'HTTP://');
    const job = h().patchJob(ws, 'respelled.txt', { repo: { url: respelled, branch: ws.branch } });

    await h().send(job);
    await h().drive('agent-jobs');

    expect(await h().getJob(job.jobId)).toMatchObject({ status: 'SUCCEEDED' });
  });

  it('refuses a mismatching job on a BLOCKED workspace as WORKSPACE_MISMATCH (it can never run), leaving the fence as it was', async () => {
    const ws = await boundWorkspace();
    const poison = h().patchJob(ws, 'first.txt'); // adds a file that already exists: does not apply
    await h().send(poison);
    await h().drive('agent-jobs');
    expect(await h().getWorkspace(ws.workspaceId)).toMatchObject({ state: 'BLOCKED', blockedBy: poison.jobId });
    await h().deadLetters('agent-jobs');
    const other = await h().workspace();
    const hostile = h().patchJob(ws, 'elsewhere.txt', { repo: { url: other.repoUrl, branch: other.branch } });

    await h().send(hostile);
    expect(await h().deliverOnce('agent-jobs')).toEqual({ acknowledged: true });

    expect(await h().getJob(hostile.jobId)).toMatchObject({
      status: 'FAILED',
      error: { reason: 'WORKSPACE_MISMATCH' },
    });
    expect(await h().getWorkspace(ws.workspaceId)).toMatchObject({ state: 'BLOCKED', blockedBy: poison.jobId });
  });

  it("pins a run_tests after a refused mismatch to the bound repository's head", async () => {
    const ws = await boundWorkspace();
    const other = await h().workspace();
    await h().send(h().patchJob(ws, 'elsewhere.txt', { repo: { url: other.repoUrl, branch: other.branch } }));
    const tests = h().job(ws, 'run_tests', { command: 'test -f first.txt && test ! -f elsewhere.txt' });
    await h().send(tests);

    await h().settle();

    const head = (await h().getWorkspace(ws.workspaceId))?.head;
    expect(await h().getJob(tests.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      pin: { repoUrl: ws.repoUrl, branch: ws.branch, sha: head },
      result: { verdict: 'passed' },
    });
  });
});

describe('a repository branch is bound to one workspace (trust side)', () => {
  const h = withTrustHarness();

  /** The same workspace id in other letters: a second workspace to the ledger, one to a careless reader. */
  const caseVariant = (ws: Workspace): Workspace => ({ ...ws, workspaceId: ws.workspaceId.toUpperCase() });

  it("refuses a second workspace (a case variant of a BLOCKED one's id) on the same branch on its first delivery: nothing passes the fence, nothing interleaves", async () => {
    const ws = await h().workspace();
    const first = h().patchJob(ws, 'first.txt');
    await h().send(first);
    await h().drive('agent-jobs');
    const poison = h().patchJob(ws, 'first.txt'); // adds a file that already exists: does not apply
    await h().send(poison);
    await h().drive('agent-jobs');
    expect(await h().getWorkspace(ws.workspaceId)).toMatchObject({ state: 'BLOCKED', blockedBy: poison.jobId });
    await h().deadLetters('agent-jobs');
    const refsBefore = await h().refs(ws);
    const twin = caseVariant(ws);
    const past = h().patchJob(twin, 'past-the-fence.txt');

    await h().send(past);
    expect(await h().deliverOnce('agent-jobs')).toEqual({ acknowledged: true });

    expect(await h().getJob(past.jobId)).toMatchObject({
      status: 'FAILED',
      error: {
        reason: 'BRANCH_IN_USE',
        message: expect.stringContaining(
          `branch ${ws.branch} of ${ws.repoUrl} is bound to workspace ${ws.workspaceId}`,
        ),
      },
    });
    expect((await h().deadLetters('agent-jobs')).map((d) => d.reason)).toEqual(['BRANCH_IN_USE']);
    expect(await h().refs(ws)).toBe(refsBefore);
    // The twin is neither bound nor blocked; the fence of the first stands as it was.
    expect(await h().getWorkspace(twin.workspaceId)).toBeUndefined();
    expect(await h().getWorkspace(ws.workspaceId)).toMatchObject({ state: 'BLOCKED', blockedBy: poison.jobId });
  });

  it.each<[string, (ws: Workspace) => { url: string; branch: string }]>([
    ['the URL with ".git" dropped', (ws) => ({ url: ws.repoUrl.replace(/\.git$/, ''), branch: ws.branch })],
    ['the URL with a trailing "/"', (ws) => ({ url: `${ws.repoUrl}/`, branch: ws.branch })],
    [
      'the path in capitals',
      (ws) => ({ url: ws.repoUrl.replace(ws.workspaceId, ws.workspaceId.toUpperCase()), branch: ws.branch }),
    ],
    ['the branch in capitals', (ws) => ({ url: ws.repoUrl, branch: ws.branch.toUpperCase() })],
  ])('takes %s for the same branch: a second workspace naming it is refused', async (_spelling, respell) => {
    const ws = await h().workspace();
    await h().send(h().patchJob(ws, 'first.txt'));
    await h().drive('agent-jobs');
    const other = { ...ws, workspaceId: `other-${ws.workspaceId}` };
    const job = h().patchJob(other, 'respelled.txt', { repo: respell(ws) });

    await h().send(job);
    await h().drive('agent-jobs');

    expect(await h().getJob(job.jobId)).toMatchObject({ status: 'FAILED', error: { reason: 'BRANCH_IN_USE' } });
    expect(await h().getWorkspace(other.workspaceId)).toBeUndefined();
  });

  it('leaves no claim on a branch named by a job its workspace refused (WORKSPACE_MISMATCH): another workspace binds it', async () => {
    const ws = await h().workspace();
    await h().send(h().patchJob(ws, 'first.txt'));
    await h().drive('agent-jobs');
    const free = await h().workspace();
    const mismatched = h().patchJob(ws, 'elsewhere.txt', { repo: { url: free.repoUrl, branch: free.branch } });
    await h().send(mismatched);
    await h().drive('agent-jobs');
    expect(await h().getJob(mismatched.jobId)).toMatchObject({
      status: 'FAILED',
      error: { reason: 'WORKSPACE_MISMATCH' },
    });

    const owner = h().patchJob(free, 'owner.txt');
    await h().send(owner);
    await h().drive('agent-jobs');

    expect(await h().getJob(owner.jobId)).toMatchObject({ status: 'SUCCEEDED' });
  });
});

/** The documented recovery: the next job of the workspace, with a new id, is applied. */
async function expectUsable(h: TrustHarness, ws: Workspace): Promise<void> {
  const next = h.patchJob(ws, `after-${Date.now()}.txt`);
  await h.send(next);
  await h.drive('agent-jobs');
  expect(await h.getJob(next.jobId)).toMatchObject({ status: 'SUCCEEDED' });
  expect((await h.getWorkspace(ws.workspaceId))?.head).toBe((await h.getJob(next.jobId))?.result?.['commitSha']);
}
