/**
 * Output an operator and an agent can follow, as each meets it: `agent-jobs logs <job> --follow`
 * prints a test run's output while the command runs (each line before the next is printed), then
 * ends with the job's verdict once it has one; the MCP server's `test_log` with `followSeconds`
 * sends the output as progress notifications while it runs, then returns the tail and the verdict.
 */
import { spawn } from 'node:child_process';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { startMcp } from '../support/mcp-client';
import {
  BIN,
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from './harness';

jest.setTimeout(180_000);

let platform: RunningPlatform;

beforeAll(async () => {
  platform = await startPlatform();
  const source = await makeRepository({ 'app.txt': 'one\n' }, ['follow']);
  const repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'follow'])).url;
  const [bind] = await diffChain(source, [{ 'notes.txt': 'follow\n' }]);
  await platform.cliJson(
    applyPatchArgs('ws-follow', 'follow-bind', repoUrl, 'follow', bind ?? '', 'Bind the workspace'),
  );
  await platform.cliJson(['wait', 'follow-bind', '--timeout', '120']);
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

test('logs --follow prints each line of a running test while it runs, then the verdict', async () => {
  // Each line waits for a file the test makes only once it has seen the line before: printed while running, or never.
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-follow',
    '--job-id',
    'follow-t1',
    '--command',
    'for i in 1 2 3; do echo "step $i"; sleep 1.5; done; echo done',
  ]);
  await platform.untilJob('follow-t1', (job) => job.status === 'RUNNING');
  const child = spawn(process.execPath, [BIN, 'logs', 'follow-t1', '--follow', '--state-dir', platform.stateDir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const seenWhileRunning: string[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    for (const step of ['step 1', 'step 2', 'step 3'])
      if (stdout.includes(step) && !seenWhileRunning.includes(step)) seenWhileRunning.push(step);
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const closed = new Promise<number | null>((resolve) => child.once('close', resolve));
  let ended = false;
  void closed.then(() => (ended = true));
  /** The job's status once `step` was printed; undefined when logs ended without printing it. */
  const statusWhen = async (step: string) => {
    while (!stdout.includes(step) && !ended) await new Promise((resolve) => setTimeout(resolve, 50));
    return stdout.includes(step)
      ? (await platform.cliJson<{ status: string }>(['status', 'follow-t1'])).status
      : undefined;
  };

  // The second line is shown while the job still runs: not at its end.
  expect(await statusWhen('step 2')).toBe('RUNNING');
  const code = await closed;

  expect(code).toBe(0);
  expect(stdout).toBe('step 1\nstep 2\nstep 3\ndone\n');
  expect(seenWhileRunning).toEqual(['step 1', 'step 2', 'step 3']);
  expect(stderr).toMatch(/^--- follow-t1: tests passed ---$/m);
});

test('logs --follow of a job that is not a command stage says so and exits 2', async () => {
  const refused = await platform.cli(['logs', 'follow-bind', '--follow']);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(/follow-bind is an apply_patch job: only command stages .* print output/);
});

test('MCP test_log with followSeconds sends the output as progress notifications while the run runs, then its tail and verdict', async () => {
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-follow',
    '--job-id',
    'follow-t2',
    '--command',
    'echo "agent step 1"; sleep 8; echo "agent step 2"',
  ]);
  await platform.untilJob('follow-t2', (job) => job.status === 'RUNNING');
  const session = await startMcp({ stateDir: platform.stateDir });
  try {
    const progress: Progress[] = [];
    const statusAtFirst: string[] = [];
    let settled = false;
    const call = session
      .result<{ status: string; tail: string; running?: boolean }>(
        'test_log',
        { jobId: 'follow-t2', followSeconds: 60 },
        progress,
      )
      .finally(() => (settled = true));
    while (progress.length === 0 && !settled) await new Promise((resolve) => setTimeout(resolve, 50));
    statusAtFirst.push((await platform.cliJson<{ status: string }>(['status', 'follow-t2'])).status);
    const answer = await call;

    expect(statusAtFirst).toEqual(['RUNNING']);
    expect(progress[0]?.message).toContain('agent step 1');
    expect(answer).toMatchObject({ status: 'tests passed', tail: 'agent step 1\nagent step 2\n' });
    expect(answer.running).toBeUndefined();
    expect(session.transportErrors).toEqual([]);
  } finally {
    await session.close();
  }
});
