/**
 * The agent's loop, closed by the agent alone: every step below goes through the MCP SDK's own
 * client, as an agent runtime would (the repository is imported once with the CLI, as an operator
 * would). A patch breaks the tests; open_pr refuses that commit and says why; a fixing patch turns
 * them green and the pull request opens. Then a patch that does not apply blocks the workspace: the
 * agent reads the branch's lines from job_status, recovers its workspace over MCP (dismiss, unblock
 * dropping what it had queued behind), writes the next patch from what it read, and goes on. One
 * pull request in the end. The README's MCP section shows this session.
 */
import { readFile, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { BIN, startMcp, type McpSession } from '../support/mcp-client';
import { diffChain, makeRepository, removeScratch, scratchDir, startPlatform, type RunningPlatform } from './harness';

jest.setTimeout(300_000);

interface JobView {
  jobId: string;
  status: string;
  label?: string;
  result?: Record<string, unknown>;
  error?: {
    reason: string;
    message: string;
    repositoryData?: { path: string; head: string; branch: { lines: string[] } };
  };
}

let platform: RunningPlatform;
let mcp: McpSession;
let source: string;
let repoUrl: string;

beforeAll(async () => {
  platform = await startPlatform();
  source = await makeRepository(
    {
      'greeting.txt': 'hello\n',
      'test.sh': 'grep -q hello greeting.txt || { echo "greeting.txt lost its hello"; exit 1; }\n',
    },
    ['agent-loop'],
  );
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'loop'])).url;
  mcp = await startMcp({ args: [BIN, 'mcp', '--state-dir', platform.stateDir, '--workspace', 'ws-loop'] });
});

afterAll(async () => {
  await mcp?.close();
  await platform?.stop();
  await removeScratch();
});

const repo = () => ({ url: repoUrl, branch: 'agent-loop' });

async function send(type: string, args: Record<string, unknown>): Promise<string> {
  return (await mcp.result<{ jobId: string }>(type, { workspaceId: 'ws-loop', ...args })).jobId;
}

async function waitFor(...jobIds: string[]): Promise<JobView[]> {
  return (await mcp.result<{ jobs: JobView[] }>('wait_for_jobs', { jobIds, timeoutSeconds: 150 })).jobs;
}

async function pullRequests(): Promise<{ head: string; number: number }[]> {
  return (
    JSON.parse(
      await readFile(path.join(platform.stateDir, 'pull-requests.json'), 'utf8').catch(() => '{"pulls":[]}'),
    ) as { pulls: { head: string; number: number }[] }
  ).pulls;
}

test('red tests open no pull request; green ones open it once; a patch that does not apply is read, recovered from and followed, all over MCP', async () => {
  const [breaking, fixing] = await diffChain(source, [
    { 'greeting.txt': 'goodbye\n' },
    { 'greeting.txt': 'hello world\n' },
  ]);

  // 1. A patch that breaks the tests, the tests, and a pull request asked for at once.
  const broken = await send('apply_patch', { payload: { repo: repo(), diffFile: breaking, message: 'Say goodbye' } });
  const red = await send('run_tests', { jobId: 'loop-tests-red' });
  const refusedPr = await send('open_pr', { payload: { baseBranch: 'main', title: 'Greetings' } });
  const [patched, tested, pr] = await waitFor(broken, red, refusedPr);
  expect([patched?.status, tested?.label]).toEqual(['SUCCEEDED', 'tests failed']);
  const redCommit = String(patched?.result?.['commitSha']);
  expect(pr).toMatchObject({ status: 'FAILED', error: { reason: 'REQUIREMENT_FAILED' } });
  // The reason names the job, its verdict and the commit: what the agent needs to act on.
  expect(pr?.error?.message).toContain('loop-tests-red');
  expect(pr?.error?.message).toContain('tests failed');
  expect(pr?.error?.message).toContain(redCommit.slice(0, 12));
  expect(await pullRequests()).toEqual([]);
  expect((await mcp.result<{ tail: string }>('test_log', { jobId: red })).tail).toContain(
    'greeting.txt lost its hello',
  );
  // A refused gate blocks nothing: the agent goes on in the same workspace.
  expect(await mcp.result('workspace_state', { workspaceId: 'ws-loop' })).toMatchObject({
    state: 'ACTIVE',
    head: redCommit,
  });

  // 2. The fixing patch, green tests, the pull request.
  const fixed = await send('apply_patch', { payload: { repo: repo(), diffFile: fixing, message: 'Greet the world' } });
  const green = await send('run_tests', {});
  const openedPr = await send('open_pr', { payload: { baseBranch: 'main', title: 'Greetings' } });
  const [, passed, opened] = await waitFor(fixed, green, openedPr);
  expect(passed?.label).toBe('tests passed');
  expect(opened).toMatchObject({ status: 'SUCCEEDED', result: { number: expect.any(Number) } });
  expect((await pullRequests()).map((p) => p.head)).toEqual(['agent-loop']);

  // 3. A patch written against lines the branch no longer has: it fails and blocks; what was queued behind is skipped.
  const stale = [
    'diff --git a/greeting.txt b/greeting.txt',
    '--- a/greeting.txt',
    '+++ b/greeting.txt',
    '@@ -1 +1 @@',
    '-hello',
    '+hello again',
    '',
  ].join('\n');
  const notApplied = await send('apply_patch', { payload: { repo: repo(), diff: stale, message: 'Greet again' } });
  const behind = await send('run_tests', {});
  const [failed, skipped] = await waitFor(notApplied, behind);
  expect([failed?.status, failed?.error?.reason, skipped?.status]).toEqual([
    'FAILED',
    'PATCH_DOES_NOT_APPLY',
    'SKIPPED',
  ]);
  expect(await mcp.result('workspace_state', { workspaceId: 'ws-loop' })).toMatchObject({
    state: 'BLOCKED',
    blockedBy: notApplied,
  });

  // The agent reads why: the branch's lines where its hunk should apply.
  const why = await mcp.result<JobView>('job_status', { jobId: notApplied });
  const lines = why.error?.repositoryData?.branch.lines ?? [];
  expect(lines).toEqual(['hello world']);

  // It recovers its own workspace: the failure dismissed (its patch is replaced), the skipped run dropped.
  await mcp.result('dismiss_job', {
    jobId: notApplied,
    reason: 'written against an older greeting; replaced by a patch against the branch as it is',
  });
  const unblocked = await mcp.result<{ state: string }>('unblock_workspace', { workspaceId: 'ws-loop', mode: 'drop' });
  expect(unblocked.state).toBe('ACTIVE');

  // And goes on, with a patch written from the lines it read.
  const rewritten = path.join(await scratchDir('agent-jobs-loop-'), 'again.diff');
  await writeFile(
    rewritten,
    [
      'diff --git a/greeting.txt b/greeting.txt',
      '--- a/greeting.txt',
      '+++ b/greeting.txt',
      '@@ -1 +1 @@',
      ...lines.map((line) => `-${line}`),
      '+hello again',
      '',
    ].join('\n'),
  );
  const again = await send('apply_patch', { payload: { repo: repo(), diffFile: rewritten, message: 'Greet again' } });
  const finalTests = await send('run_tests', {});
  const updatedPr = await send('open_pr', { payload: { baseBranch: 'main', title: 'Greetings' } });
  const [applied, finalRun, finalPr] = await waitFor(again, finalTests, updatedPr);
  expect([applied?.status, finalRun?.label, finalPr?.status]).toEqual(['SUCCEEDED', 'tests passed', 'SUCCEEDED']);
  // One pull request for the branch, all along: the last open_pr found it open.
  expect(finalPr?.result?.['number']).toBe(opened?.result?.['number']);
  expect((await pullRequests()).map((p) => p.head)).toEqual(['agent-loop']);
  expect(await platform.remoteLog(repoUrl, 'agent-loop')).toEqual([
    'Greet again',
    'Greet the world',
    'Say goodbye',
    'initial',
  ]);
  expect(mcp.transportErrors).toEqual([]);
});
