/**
 * An agent recovers its own workspace over MCP, driven by the MCP SDK's own client against the
 * local platform: a patch that does not apply blocks the workspace and skips the job behind it;
 * the agent dismisses the failure (the ledger records the client by name, as the CLI shows it),
 * unblocks with a replay, cancels a running job, sends a failed job left on the DLQ back to run
 * again (redrive_jobs), and each result says what changed and what remains. Then the scope: a server started for one workspace (by --workspace, or by
 * AGENT_JOBS_MCP_WORKSPACES) refuses every tool and the timeline resource on another, naming its
 * scope, and changes nothing there.
 */
import { eventually } from '../support/eventually';
import { BIN, resultText, startMcp, type McpSession } from '../support/mcp-client';
import { processesSleeping } from '../support/processes';
import { diffChain, makeRepository, removeScratch, startPlatform, type RunningPlatform } from './harness';

jest.setTimeout(240_000);

const SLEEP_TAG = `301.${process.pid}`;
/** Who the test's client says it is (test/support/mcp-client.ts), as the ledger records it. */
const ACTOR = 'agent-jobs-test (mcp)';

interface JobView {
  jobId: string;
  status: string;
  finished: boolean;
  dismissed?: { by: string; reason: string };
}

let platform: RunningPlatform;
let source: string;
let repoUrl: string;
const sessions: McpSession[] = [];

async function session(options: { workspaces?: string[]; env?: Record<string, string> } = {}): Promise<McpSession> {
  const scope = (options.workspaces ?? []).flatMap((id) => ['--workspace', id]);
  const started = await startMcp({ args: [BIN, 'mcp', '--state-dir', platform.stateDir, ...scope], env: options.env });
  sessions.push(started);
  return started;
}

beforeAll(async () => {
  platform = await startPlatform();
  source = await makeRepository({ 'greeting.txt': 'hello\n', 'test.sh': 'grep -q hello greeting.txt\n' }, [
    'agent-r',
    'agent-d',
    'agent-x',
    'agent-y',
  ]);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'recover'])).url;
});

afterEach(() => {
  for (const s of sessions) expect(s.transportErrors).toEqual([]);
});

afterAll(async () => {
  for (const pid of processesSleeping(SLEEP_TAG)) process.kill(pid, 'SIGKILL');
  await Promise.all(sessions.map((s) => s.close()));
  await platform?.stop();
  await removeScratch();
});

/** A diff whose context greeting.txt does not have: it blocks the workspace it is sent to. */
const NOT_APPLYING = [
  'diff --git a/greeting.txt b/greeting.txt',
  '--- a/greeting.txt',
  '+++ b/greeting.txt',
  '@@ -1,2 +1,2 @@',
  ' hello',
  '-goodbye',
  '+bye',
  '',
].join('\n');

test('an agent recovers its own BLOCKED workspace: dismiss (recorded by its client name), unblock with a replay, cancel, each result saying what changed and what remains', async () => {
  const mcp = await session({ workspaces: ['ws-r'] });
  await mcp.result('apply_patch', {
    workspaceId: 'ws-r',
    jobId: 'r-p1',
    payload: { repo: { url: repoUrl, branch: 'agent-r' }, diff: NOT_APPLYING, message: 'Say bye' },
  });
  await mcp.result('run_tests', { workspaceId: 'ws-r', jobId: 'r-t1' });
  const waited = await mcp.result<{ jobs: JobView[] }>('wait_for_jobs', {
    jobIds: ['r-p1', 'r-t1'],
    timeoutSeconds: 150,
  });
  expect(waited.jobs.map((j) => [j.jobId, j.status])).toEqual([
    ['r-p1', 'FAILED'],
    ['r-t1', 'SKIPPED'],
  ]);
  expect(await mcp.result('workspace_state', { workspaceId: 'ws-r' })).toMatchObject({
    state: 'BLOCKED',
    blockedBy: 'r-p1',
  });

  const dismissed = await mcp.result<{ dismissed: { by: string }; removed: number; summary: string }>('dismiss_job', {
    jobId: 'r-p1',
    reason: 'the patch was written against another file: a new one follows',
  });
  expect(dismissed).toMatchObject({
    dismissed: { by: ACTOR, reason: 'the patch was written against another file: a new one follows' },
    removed: 1,
  });
  expect(dismissed.summary).toMatch(
    /^job r-p1: FAILED, dismissed by agent-jobs-test \(mcp\) at .*; 1 copy removed from the agent-jobs DLQ; workspace ws-r stays BLOCKED: unblock_workspace/,
  );
  // The same ledger record the CLI writes and reads.
  expect(await platform.cliJson<JobView>(['status', 'r-p1', '--json'])).toMatchObject({ dismissed: { by: ACTOR } });

  const unblocked = await mcp.result<{
    previousState: string;
    state: string;
    jobs: { jobId: string; action: string }[];
    stillOnDlq: string[];
    summary: string;
  }>('unblock_workspace', { workspaceId: 'ws-r', mode: 'replay' });
  expect(unblocked).toMatchObject({
    previousState: 'BLOCKED',
    state: 'ACTIVE',
    jobs: [{ jobId: 'r-t1', action: 'replayed' }],
    stillOnDlq: [],
  });
  expect(unblocked.summary).toMatch(
    /^workspace ws-r ACTIVE again \(was BLOCKED\); replayed in order: r-t1; 0 job\(s\) of it still on the DLQ; workspace ws-r is ACTIVE; /,
  );
  const replayed = await mcp.result<{ jobs: JobView[]; allSucceeded: boolean }>('wait_for_jobs', {
    jobIds: ['r-t1'],
    timeoutSeconds: 150,
  });
  expect(replayed).toMatchObject({ allSucceeded: true, jobs: [{ jobId: 'r-t1', status: 'SUCCEEDED' }] });

  // A run that goes on: cancelled while it runs, its build stopped.
  await mcp.result('run_tests', { workspaceId: 'ws-r', jobId: 'r-t2', payload: { command: `sleep ${SLEEP_TAG}` } });
  await eventually(
    async () => processesSleeping(SLEEP_TAG),
    (pids) => pids.length > 0,
    { what: 'the test command running', timeoutMs: 150_000, intervalMs: 200 },
  );
  const cancelled = await mcp.result<{ previousStatus: string; status: string; summary: string }>('cancel_job', {
    jobId: 'r-t2',
  });
  expect(cancelled).toMatchObject({ previousStatus: 'RUNNING', status: 'CANCELLED' });
  expect(cancelled.summary).toMatch(
    /^job r-t2: RUNNING -> CANCELLED \(its build .* is stopped; .*\); workspace ws-r is ACTIVE; 0 of its jobs not finished$/,
  );
  await eventually(
    async () => processesSleeping(SLEEP_TAG),
    (pids) => pids.length === 0,
    { what: 'the cancelled run stopped', timeoutMs: 60_000, intervalMs: 200 },
  );

  // The rules are the CLI's: a finished job is not cancelled again, a dismissed one is not run again.
  expect(resultText(await mcp.call('cancel_job', { jobId: 'r-t2' }))).toMatch(/job r-t2 is CANCELLED already/);
  const redriven = await mcp.result<{ redriven: unknown[]; notRedriven: string[] }>('redrive_jobs', {
    jobIds: ['r-p1'],
  });
  expect(redriven).toMatchObject({ redriven: [], notRedriven: ['r-p1'] });
});

test('unblock with a replay leaves the failed job on the DLQ, said so; redrive_jobs runs it again; dismiss and unblock end it', async () => {
  const mcp = await session({ workspaces: ['ws-d'] });
  await mcp.result('apply_patch', {
    workspaceId: 'ws-d',
    jobId: 'd-p1',
    payload: { repo: { url: repoUrl, branch: 'agent-d' }, diff: NOT_APPLYING, message: 'Say bye' },
  });
  await mcp.result('run_tests', { workspaceId: 'ws-d', jobId: 'd-t1' });
  await mcp.result('wait_for_jobs', { jobIds: ['d-p1', 'd-t1'], timeoutSeconds: 150 });

  const unblocked = await mcp.result<{ state: string; stillOnDlq: string[]; summary: string }>('unblock_workspace', {
    workspaceId: 'ws-d',
    mode: 'replay',
  });
  expect(unblocked).toMatchObject({ state: 'ACTIVE', stillOnDlq: ['d-p1'] });
  expect(unblocked.summary).toContain(
    'replayed in order: d-t1; 1 job(s) of it still on the DLQ (d-p1: dismiss_job or redrive_jobs)',
  );
  await mcp.result('wait_for_jobs', { jobIds: ['d-t1'], timeoutSeconds: 150 });

  const redriven = await mcp.result<{ redriven: { jobId: string }[]; notRedriven: string[]; summary: string }>(
    'redrive_jobs',
    { jobIds: ['d-p1'] },
  );
  expect(redriven).toMatchObject({ redriven: [{ jobId: 'd-p1' }], notRedriven: [] });
  expect(redriven.summary).toBe('1 of 1 sent back to run again (d-p1)');
  // It fails again (the branch has not changed), on its second attempt, and blocks the workspace again.
  await eventually(
    () => mcp.result<{ state: string; blockedBy?: string }>('workspace_state', { workspaceId: 'ws-d' }),
    (ws) => ws.state === 'BLOCKED',
    { what: 'ws-d blocked again', timeoutMs: 150_000, intervalMs: 250 },
  );
  expect(await mcp.result('job_status', { jobId: 'd-p1' })).toMatchObject({ status: 'FAILED', attempt: 2 });

  await mcp.result('dismiss_job', { jobId: 'd-p1', reason: 'the patch will not apply: a new one follows' });
  const dropped = await mcp.result<{ previousState: string; state: string; jobs: unknown[]; summary: string }>(
    'unblock_workspace',
    { workspaceId: 'ws-d', mode: 'drop' },
  );
  expect(dropped).toMatchObject({ previousState: 'BLOCKED', state: 'ACTIVE', jobs: [] });
  expect(dropped.summary).toBe(
    'workspace ws-d ACTIVE again (was BLOCKED); 0 job(s) of it still on the DLQ; workspace ws-d is ACTIVE; 0 of its jobs not finished',
  );
});

test('a server started for workspace X refuses to read or act on workspace Y, naming its scope, and changes nothing there', async () => {
  const everywhere = await session();
  const [diffFile] = await diffChain(source, [{ 'greeting.txt': 'hello there\n' }]);
  await everywhere.result('apply_patch', {
    workspaceId: 'ws-y',
    jobId: 'y-p1',
    payload: { repo: { url: repoUrl, branch: 'agent-y' }, diffFile, message: 'Say hello there' },
  });
  await everywhere.result('run_tests', { workspaceId: 'ws-y', jobId: 'y-t1' });
  expect(await everywhere.result('wait_for_jobs', { jobIds: ['y-p1', 'y-t1'], timeoutSeconds: 150 })).toMatchObject({
    allFinished: true,
  });
  const before = await platform.cliJson<unknown>(['workspace', 'show', 'ws-y', '--json']);

  for (const scoped of [
    await session({ workspaces: ['ws-x'] }),
    await session({ env: { AGENT_JOBS_MCP_WORKSPACES: 'ws-x' } }),
  ]) {
    const calls: [string, Record<string, unknown>][] = [
      ['job_status', { jobId: 'y-p1' }],
      ['wait_for_jobs', { jobIds: ['y-t1'] }],
      ['test_log', { jobId: 'y-t1' }],
      ['workspace_state', { workspaceId: 'ws-y' }],
      ['workspace_history', { workspaceId: 'ws-y' }],
      ['run_tests', { workspaceId: 'ws-y', jobId: 'y-t2' }],
      [
        'apply_patch',
        {
          workspaceId: 'ws-y',
          jobId: 'y-p2',
          payload: { repo: { url: repoUrl, branch: 'agent-y' }, diffFile, message: 'again' },
        },
      ],
      ['cancel_job', { jobId: 'y-t1' }],
      ['dismiss_job', { jobId: 'y-p1', reason: 'not mine' }],
      ['unblock_workspace', { workspaceId: 'ws-y', mode: 'drop' }],
      ['redrive_jobs', { jobIds: ['y-p1'] }],
    ];
    for (const [tool, args] of calls) {
      const answer = await scoped.call(tool, args);
      expect([tool, answer.isError]).toEqual([tool, true]);
      expect([tool, resultText(answer)]).toEqual([
        tool,
        expect.stringMatching(
          /(workspace ws-y is outside|job y-[pt]\d is not of a workspace in) this server's scope \(workspace ws-x\): it neither reads nor changes it/,
        ),
      ]);
      // Nothing of the other workspace's jobs in the answer.
      expect(resultText(answer)).not.toContain('SUCCEEDED');
    }
    await expect(scoped.client.readResource({ uri: 'agent-jobs://workspaces/ws-y/timeline' })).rejects.toThrow(
      /workspace ws-y is outside this server's scope \(workspace ws-x\)/,
    );
    const { resources } = await scoped.client.listResources();
    expect(resources.map((r) => r.uri)).not.toContain('agent-jobs://workspaces/ws-y/timeline');
    // Its own workspace is served.
    await scoped.result('apply_patch', {
      workspaceId: 'ws-x',
      payload: { repo: { url: repoUrl, branch: 'agent-x' }, diffFile, message: 'Say hello there' },
    });
  }
  expect(await platform.cliJson<unknown>(['workspace', 'show', 'ws-y', '--json'])).toEqual(before);
  expect((await platform.cliLines<{ jobId: string }>(['jobs', '--workspace', 'ws-y'])).map((j) => j.jobId)).toEqual([
    'y-p1',
    'y-t1',
  ]);
});
