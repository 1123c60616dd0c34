/**
 * Cancelling a running command-stage job through the CLI: every command stage of the catalog, once
 * its build runs, is cancelled with `agent-jobs cancel`; the build's processes end (the run's state
 * says so, and no process of the run is left), the job stays CANCELLED when the build's completion
 * arrives after the cancel, no outcome event is published for it, a cancel sent again changes
 * nothing, and the workspace's ordered lane goes on.
 */
import { readdir, readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { COMMAND_JOB_TYPES } from '../../contract/job-types';
import { TEST_RUNS_DIR } from '../../tools/local/state-dir';
import { eventually } from '../support/eventually';
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from './harness';

jest.setTimeout(240_000);

interface JobJson {
  jobId: string;
  status: string;
  previousStatus?: string;
}

let platform: RunningPlatform;
let repoUrl: string;
let source: string;

beforeAll(async () => {
  platform = await startPlatform();
  source = await makeRepository({ 'README.md': '# app\n' }, ['cancel']);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'cancel'])).url;
  const [bind] = await diffChain(source, [{ 'notes.txt': 'cancel\n' }]);
  await platform.cliJson(
    applyPatchArgs('ws-cancel', 'cancel-bind', repoUrl, 'cancel', bind ?? '', 'Bind the workspace'),
  );
  await platform.cliJson(['wait', 'cancel-bind', '--timeout', '120']);
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

/** The local runner's record of a job's run (tools/local/test-runner.ts LocalRunState), read from the state directory. */
async function runState(
  jobId: string,
): Promise<{ status: { state: string; status?: string; message?: string }; marker?: string }> {
  const runs = path.join(platform.stateDir, TEST_RUNS_DIR, 'runs');
  // `<jobId>.<run>.<key>.json`: one run of each job here.
  const [file] = (await readdir(runs)).filter((name) => name.startsWith(`${jobId}.0.`) && name.endsWith('.json'));
  if (file === undefined) throw new Error(`no run of ${jobId} in ${runs}`);
  return JSON.parse(await readFile(path.join(runs, file), 'utf8')) as never;
}

/** Processes whose environment carries the run's marker: what the command started. */
async function processesOfRun(marker: string): Promise<number[]> {
  const pids = (await readdir('/proc')).filter((entry) => /^\d+$/.test(entry));
  const environs = await Promise.all(
    pids.map(async (pid) => ({
      pid: Number(pid),
      environ: await readFile(`/proc/${pid}/environ`, 'latin1').catch(() => ''),
    })),
  );
  return environs.filter((p) => p.environ.split('\0').includes(`AGENT_JOBS_TEST_RUN=${marker}`)).map((p) => p.pid);
}

/** The platform's log lines about a job (`<stateDir>/platform.log`, one JSON object a line). */
async function logLines(jobId: string): Promise<string[]> {
  const text = await readFile(path.join(platform.stateDir, 'platform.log'), 'utf8').catch(() => '');
  return text.split('\n').filter((line) => line.includes(`"jobId":"${jobId}"`));
}

test.each(COMMAND_JOB_TYPES.map((type) => [type]))(
  'a running %s job is cancelled: its build stops, it stays CANCELLED, once',
  async (type) => {
    const jobId = `cancel-${type.replace(/_/g, '-')}`;
    await platform.cliJson([
      'enqueue',
      '--type',
      type,
      '--workspace',
      'ws-cancel',
      '--job-id',
      jobId,
      '--command',
      'echo started; sleep 600',
    ]);
    await platform.untilJob<JobJson>(jobId, (job) => job.status === 'RUNNING');
    const { marker } = await eventually(
      () => runState(jobId),
      (state) => state.marker !== undefined,
      { what: `the run of ${jobId} to start its command` },
    );
    await eventually(
      () => processesOfRun(marker ?? ''),
      (pids) => pids.length > 0,
      { what: `the command of ${jobId} to run` },
    );

    const cancelled = await platform.cli(['cancel', jobId]);

    expect({ code: cancelled.code, stderr: cancelled.stderr }).toEqual({ code: 0, stderr: '' });
    expect(cancelled.stdout).toMatch(
      new RegExp(`^${jobId}: RUNNING -> CANCELLED \\(its build local:${jobId}:0:[0-9a-f]{16} is stopped`),
    );
    // The command and everything it started end; the runner records the run as stopped, not as a verdict.
    const stopped = await eventually(
      () => runState(jobId),
      (state) => state.status.state !== 'RUNNING',
      { what: `the run of ${jobId} to end` },
    );
    expect(stopped.status).toMatchObject({
      state: 'ERROR',
      status: 'STOPPED',
      message: expect.stringMatching(/cancelled/),
    });
    expect(await processesOfRun(marker ?? '')).toEqual([]);
    // The build's completion arrives after the cancel and changes nothing.
    await eventually(
      () => logLines(jobId),
      (lines) => lines.some((line) => line.includes('completion changes nothing')),
      { what: `the completion of ${jobId} to be seen` },
    );
    expect(await platform.cliJson<JobJson>(['status', jobId])).toMatchObject({ status: 'CANCELLED' });
    expect((await platform.cli(['status', jobId])).stdout).toMatch(
      new RegExp(`^before\\s+running: build local:${jobId}:0:[0-9a-f]{16}, stopped by the cancel$`, 'm'),
    );
    expect((await platform.events()).filter((e) => e.detail['jobId'] === jobId)).toEqual([]);
    // A cancel sent again changes nothing and says why.
    const again = await platform.cli(['cancel', jobId]);
    expect({ code: again.code, stderr: again.stderr.trim() }).toEqual({
      code: 1,
      stderr: `agent-jobs: job ${jobId} is CANCELLED already`,
    });
    // `wait` ends at once: CANCELLED is final (exit 1: not succeeded).
    expect((await platform.cli(['wait', jobId, '--timeout', '30'])).code).toBe(1);
  },
);

test('a cancelled running job does not hold its workspace: the ordered lane goes on', async () => {
  const [type] = COMMAND_JOB_TYPES;
  await platform.cliJson([
    'enqueue',
    '--type',
    type ?? 'run_tests',
    '--workspace',
    'ws-cancel',
    '--job-id',
    'cancel-held',
    '--command',
    'sleep 600',
  ]);
  await platform.untilJob<JobJson>('cancel-held', (job) => job.status === 'RUNNING');
  expect((await platform.cli(['cancel', 'cancel-held'])).code).toBe(0);

  const [next] = await diffChain(source, [{ 'after.txt': 'after the cancel\n' }]);
  await platform.cliJson(
    applyPatchArgs('ws-cancel', 'cancel-after', repoUrl, 'cancel', next ?? '', 'After the cancel'),
  );

  expect((await platform.cli(['wait', 'cancel-after', '--timeout', '120'])).code).toBe(0);
  expect(await platform.cliJson(['workspace', 'show', 'ws-cancel'])).toMatchObject({ state: 'ACTIVE' });
});

test('a finished job is refused, naming its status', async () => {
  const cancelled = await platform.cli(['cancel', 'cancel-bind']);
  expect({ code: cancelled.code, stderr: cancelled.stderr.trim() }).toEqual({
    code: 1,
    stderr: 'agent-jobs: job cancel-bind is SUCCEEDED already',
  });
});
