/**
 * The fence through the CLI: a poison patch blocks its workspace, later jobs are skipped onto the
 * DLQ, and the operator drops or replays them with `workspace unblock`; `cancel` beats delivery.
 */
import { writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import {
  applyPatchArgs,
  diffChain,
  git,
  makeRepository,
  poisonPatch,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from './harness';

jest.setTimeout(240_000);

interface JobJson {
  jobId: string;
  status: string;
  blockedBy?: string;
  error?: { reason: string };
}
interface DlqRow {
  queue: string;
  jobId: string;
  workspaceId: string;
  type: string;
  status: string;
  reason?: string;
  blockedBy?: string;
}

let platform: RunningPlatform;
let source: string;
let repoUrl: string;
let poison: string;

beforeAll(async () => {
  platform = await startPlatform();
  source = await makeRepository({ 'app.txt': 'one\n' }, ['drop', 'replay', 'cancel', 'redrive', 'shown']);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'fenced'])).url;
  poison = await poisonPatch();
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

async function blockWorkspace(
  ws: string,
  branch: string,
  later: readonly { jobId: string; diff: string }[],
): Promise<void> {
  await platform.cliJson(applyPatchArgs(ws, `${ws}-poison`, repoUrl, branch, poison, 'Poison'));
  for (const job of later) await platform.cliJson(applyPatchArgs(ws, job.jobId, repoUrl, branch, job.diff, job.jobId));
  const waited = await platform.cli([
    'wait',
    `${ws}-poison`,
    ...later.map((j) => j.jobId),
    '--timeout',
    '120',
    '--json',
  ]);
  expect(waited.code).toBe(1);
}

test('a poison patch blocks its workspace; the later jobs are skipped and visible on the DLQ; --drop cancels them', async () => {
  const [first, second] = await diffChain(source, [{ 'drop-1.txt': '1\n' }, { 'drop-1.txt': '1\n2\n' }]);
  await blockWorkspace('ws-drop', 'drop', [
    { jobId: 'drop-1', diff: first ?? '' },
    { jobId: 'drop-2', diff: second ?? '' },
  ]);

  expect(await platform.cliJson<JobJson>(['status', 'ws-drop-poison'])).toMatchObject({
    status: 'FAILED',
    error: { reason: 'PATCH_DOES_NOT_APPLY' },
  });
  expect(await platform.cliJson<JobJson>(['status', 'drop-1'])).toMatchObject({
    status: 'SKIPPED',
    blockedBy: 'ws-drop-poison',
  });
  expect(await platform.cliJson(['workspace', 'show', 'ws-drop'])).toMatchObject({
    state: 'BLOCKED',
    blockedBy: 'ws-drop-poison',
  });
  const listed = (await platform.cliLines<DlqRow>(['dlq', 'list', '--queue', 'agent-jobs'])).filter(
    (r) => r.workspaceId === 'ws-drop',
  );
  expect(listed).toEqual([
    expect.objectContaining({
      queue: 'agent-jobs',
      jobId: 'ws-drop-poison',
      type: 'apply_patch',
      status: 'FAILED',
      reason: 'PATCH_DOES_NOT_APPLY',
    }),
    expect.objectContaining({ jobId: 'drop-1', status: 'SKIPPED', blockedBy: 'ws-drop-poison' }),
    expect.objectContaining({ jobId: 'drop-2', status: 'SKIPPED', blockedBy: 'ws-drop-poison' }),
  ]);
  const shown = await platform.cliJson<JobJson & { dlq: DlqRow[] }>(['dlq', 'show', 'ws-drop-poison']);
  expect(shown).toMatchObject({
    jobId: 'ws-drop-poison',
    status: 'FAILED',
    dlq: [{ queue: 'agent-jobs', reason: 'PATCH_DOES_NOT_APPLY' }],
  });
  expect(
    (await platform.events()).some((e) => e.type === 'WorkspaceBlocked' && e.detail.workspaceId === 'ws-drop'),
  ).toBe(true);

  const unblocked = await platform.cliJson<{ workspace: { state: string }; jobs: { jobId: string; action: string }[] }>(
    ['workspace', 'unblock', 'ws-drop', '--drop'],
  );

  expect(unblocked.workspace.state).toBe('ACTIVE');
  expect(unblocked.jobs).toEqual([
    expect.objectContaining({ jobId: 'ws-drop-poison', action: 'kept' }),
    expect.objectContaining({ jobId: 'drop-1', action: 'dropped' }),
    expect.objectContaining({ jobId: 'drop-2', action: 'dropped' }),
  ]);
  expect(await platform.cliJson<JobJson>(['status', 'drop-2'])).toMatchObject({ status: 'CANCELLED' });
  const after = (await platform.cliLines<DlqRow>(['dlq', 'list', '--queue', 'agent-jobs'])).filter(
    (r) => r.workspaceId === 'ws-drop',
  );
  expect(after.map((r) => r.jobId)).toEqual(['ws-drop-poison']);
  // The workspace runs again: a new job commits on top of the first (and only) good state.
  const [fresh] = await diffChain(source, [{ 'fresh.txt': 'new\n' }]);
  await platform.cliJson(applyPatchArgs('ws-drop', 'drop-3', repoUrl, 'drop', fresh ?? '', 'After unblock'));
  expect((await platform.cliJson<{ succeeded: boolean }>(['wait', 'drop-3', '--timeout', '120'])).succeeded).toBe(true);
  expect(await platform.remoteLog(repoUrl, 'drop')).toEqual(['After unblock', 'initial']);
});

test("status of a patch that does not apply prints the hunk and the branch's lines there, as data, control characters escaped", async () => {
  // A terminal's escape sequence in the patch: printed as an escape, never sent to the terminal.
  const file = path.join(path.dirname(poison), 'shown.diff');
  await writeFile(
    file,
    [
      'diff --git a/app.txt b/app.txt',
      '--- a/app.txt',
      '+++ b/app.txt',
      '@@ -1 +1 @@',
      '-not the content',
      '+\u001b]0;owned\u0007two',
      '',
    ].join('\n'),
  );
  await platform.cliJson(applyPatchArgs('ws-shown', 'shown-poison', repoUrl, 'shown', file, 'Poison'));
  expect((await platform.cli(['wait', 'shown-poison', '--timeout', '120'])).code).toBe(1);
  const head = await git(source, 'rev-parse', 'shown');

  const { stdout } = await platform.cli(['status', 'shown-poison']);
  expect(stdout).toContain(`app.txt at ${head}: content from the repository and the patch; not instructions`);
  expect(stdout).toMatch(
    /^ +@@ -1,1 \+1,1 @@ \(hunk 1 of 1\)\n +-not the content\n +\+\\u001b\]0;owned\\u0007two\n +the branch, lines 1-1 of 1:\n +1 one$/m,
  );
  expect(stdout).not.toContain('\u001b');
});

test('--replay runs the skipped jobs again in their original order', async () => {
  // The second patch edits what the first creates: it only applies if the order is kept.
  const [first, second] = await diffChain(source, [{ 'replay.txt': '1\n' }, { 'replay.txt': '1\n2\n' }]);
  await blockWorkspace('ws-replay', 'replay', [
    { jobId: 'replay-1', diff: first ?? '' },
    { jobId: 'replay-2', diff: second ?? '' },
  ]);

  const unblocked = await platform.cliJson<{ jobs: { jobId: string; action: string }[] }>([
    'workspace',
    'unblock',
    'ws-replay',
    '--replay',
  ]);

  expect(unblocked.jobs.filter((j) => j.action === 'replayed').map((j) => j.jobId)).toEqual(['replay-1', 'replay-2']);
  // Both were SKIPPED (terminal) before the replay, so `wait` could answer before they run again.
  const settled = (j: JobJson) => j.status !== 'SKIPPED' && j.status !== 'IN_FLIGHT';
  expect(await platform.untilJob<JobJson>('replay-1', settled)).toMatchObject({ status: 'SUCCEEDED' });
  expect(await platform.untilJob<JobJson>('replay-2', settled)).toMatchObject({ status: 'SUCCEEDED' });
  expect(await platform.remoteLog(repoUrl, 'replay')).toEqual(['replay-2', 'replay-1', 'initial']);
  expect(await platform.cliJson(['workspace', 'show', 'ws-replay'])).toMatchObject({ state: 'ACTIVE' });
});

test('cancel: a SKIPPED job cancelled before its replay stays CANCELLED and commits nothing', async () => {
  const [diff] = await diffChain(source, [{ 'cancel.txt': 'x\n' }]);
  await blockWorkspace('ws-cancel', 'cancel', [{ jobId: 'cancel-1', diff: diff ?? '' }]);
  expect(await platform.cliJson(['cancel', 'cancel-1'])).toMatchObject({
    jobId: 'cancel-1',
    status: 'CANCELLED',
    previousStatus: 'SKIPPED',
  });

  await platform.cliJson(['workspace', 'unblock', 'ws-cancel', '--replay']);
  // A later job of the same workspace finishing proves the replayed, cancelled one was delivered first.
  const [later] = await diffChain(source, [{ 'cancel-later.txt': 'y\n' }]);
  await platform.cliJson(applyPatchArgs('ws-cancel', 'cancel-2', repoUrl, 'cancel', later ?? '', 'Runs'));
  await platform.cliJson(['wait', 'cancel-2', '--timeout', '120']);

  expect(await platform.cliJson<JobJson>(['status', 'cancel-1'])).toMatchObject({ status: 'CANCELLED' });
  expect(await platform.remoteLog(repoUrl, 'cancel')).toEqual(['Runs', 'initial']);
  const again = await platform.cli(['cancel', 'cancel-2', '--json']);
  expect(again.code).toBe(1);
  expect(again.stderr).toContain('SUCCEEDED');
});

test('dlq redrive leaves a blocked workspace alone, then sends its failed job back to run again', async () => {
  await blockWorkspace('ws-redrive', 'redrive', []);

  const whileBlocked = await platform.cliJson<{ redriven: { jobId: string }[]; left: { jobId: string }[] }>([
    'dlq',
    'redrive',
    '--queue',
    'agent-jobs',
  ]);
  expect(whileBlocked.redriven.map((r) => r.jobId)).not.toContain('ws-redrive-poison');
  expect(whileBlocked.left.map((l) => l.jobId)).toContain('ws-redrive-poison');

  await platform.cliJson(['workspace', 'unblock', 'ws-redrive', '--drop']);
  const redriven = await platform.cliJson<{ redriven: { jobId: string }[] }>([
    'dlq',
    'redrive',
    '--queue',
    'agent-jobs',
  ]);
  expect(redriven.redriven.map((r) => r.jobId)).toContain('ws-redrive-poison');

  // It still cannot apply: the redriven delivery runs it (a second attempt) and fails it again.
  // `wait` would return at once (the job is FAILED already), so poll until the second attempt ends.
  const job = await platform.untilJob<JobJson & { attempt: number }>(
    'ws-redrive-poison',
    (j) => j.attempt >= 2 && j.status !== 'IN_FLIGHT',
  );
  expect(job).toMatchObject({ status: 'FAILED', attempt: 2, error: { reason: 'PATCH_DOES_NOT_APPLY' } });
  expect(await platform.cliJson(['workspace', 'show', 'ws-redrive'])).toMatchObject({
    state: 'BLOCKED',
    blockedBy: 'ws-redrive-poison',
  });
});
