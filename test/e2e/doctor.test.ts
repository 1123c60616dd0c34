/**
 * `agent-jobs doctor` through the CLI, on the local platform: it says how the platform isolates
 * test commands, and its end-to-end check sends an apply_patch and a run_tests to a scratch branch
 * and reports both, exit code 0 only when they went through; its clean-up, over the platform's own
 * connection, cancels a test run still running (its build stopped). (The stack checks, which need
 * AWS, are in test/integration/doctor.test.ts.)
 */
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { cleanUpScratchRun } from '../../tools/cli/doctor';
import { PLATFORM_FILE, TEST_RUNS_DIR } from '../../tools/local/state-dir';
import { connect } from '../../tools/operator/connection';
import { eventually } from '../support/eventually';
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from './harness';

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

jest.setTimeout(180_000);

interface DoctorJson {
  passed: boolean;
  checks: { check: string; status: string; detail: string }[];
}

let platform: RunningPlatform;
let repoUrl: string;
let source: string;

beforeAll(async () => {
  platform = await startPlatform();
  // doctor-slow: a branch of its own for the clean-up's test (a branch has one workspace).
  source = await makeRepository({ 'README.md': '# app\n' }, ['doctor-scratch', 'doctor-slow']);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'doctor'])).url;
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

test('runs one job end to end on a scratch workspace and says the stack checks need --stack', async () => {
  const run = await platform.cli([
    'doctor',
    '--repo',
    repoUrl,
    '--branch',
    'doctor-scratch',
    '--timeout',
    '120',
    '--json',
  ]);
  expect({ code: run.code, stderr: run.stderr }).toMatchObject({ code: 0 });
  const report = JSON.parse(run.stdout) as DoctorJson;
  // What the platform said at start about its test isolation (its platform.json): a warning below the full sandbox.
  const isolation = (
    JSON.parse(await readFile(path.join(platform.stateDir, PLATFORM_FILE), 'utf8')) as {
      testIsolation: { summary: string; degraded?: string };
    }
  ).testIsolation;
  expect(report.passed).toBe(true);
  expect(report.checks.map((c) => [c.check, c.status])).toEqual([
    ['stack outputs, alarm notification, secrets', 'skip'],
    ['test command isolation (local platform)', isolation.degraded ? 'warn' : 'pass'],
    ['end-to-end job on a scratch workspace', 'pass'],
  ]);
  expect(report.checks[1]?.detail).toMatch(
    new RegExp(
      `^${isolation.degraded ? '.+\\. ' : ''}${escapeRegExp(isolation.summary)}\\. Stops: .+\\. Does not stop: .+\\.$`,
    ),
  );
  expect(report.checks[2]?.detail).toMatch(/doctor-\w+-patch committed [0-9a-f]{12}, doctor-\w+-tests passed/);
  expect((await platform.remoteLog(repoUrl, 'doctor-scratch'))[0]).toMatch(/^agent-jobs doctor: smoke check doctor-/);
});

test('without --branch it makes its scratch branch on the local platform, and leaves nothing on the DLQs', async () => {
  const run = await platform.cli(['doctor', '--repo', repoUrl, '--timeout', '120', '--json']);
  expect({ code: run.code, stderr: run.stderr }).toMatchObject({ code: 0 });
  const report = JSON.parse(run.stdout) as DoctorJson;
  expect(report.checks.find((c) => c.check === 'end-to-end job on a scratch workspace')).toMatchObject({
    status: 'pass',
    detail: expect.stringMatching(
      /^created branch agent-jobs-doctor at [0-9a-f]{12}; workspace doctor-\w+: doctor-\w+-patch committed/,
    ),
  });
  expect((await platform.remoteLog(repoUrl, 'agent-jobs-doctor'))[0]).toMatch(
    /^agent-jobs doctor: smoke check doctor-/,
  );
  await expectNoDebris();
});

test("fails with the job's reason when the job cannot go through, exits 1, and cleans up after itself", async () => {
  // A repository the platform does not have (its server answers 404): the patch fails for good, the test run is skipped behind it.
  const missing = new URL('missing.git', `${platform.ready.gitUrl}/`).toString();
  const run = await platform.cli(['doctor', '--repo', missing, '--branch', 'doctor-scratch', '--timeout', '120']);
  expect(run.code).toBe(1);
  expect(run.stdout).toMatch(
    /FAIL\s+end-to-end job on a scratch workspace\s+workspace doctor-\w+: doctor-\w+-patch FAILED \([A-Z_]+: /,
  );
  expect(run.stdout).toMatch(
    /cleaned up: doctor-\w+-patch dismissed, doctor-\w+-tests cancelled, workspace doctor-\w+ unblocked/,
  );
  expect(run.stdout).toMatch(/1 check\(s\) failed/);
  await expectNoDebris();
});

/** No doctor workspace left BLOCKED, and nothing of the doctor's jobs on a DLQ, listed or not. */
async function expectNoDebris(): Promise<void> {
  const workspaces = await platform.cliLines<{ workspaceId: string; state: string }>(['workspaces']);
  expect(workspaces.filter((w) => w.workspaceId.startsWith('doctor-') && w.state !== 'ACTIVE')).toEqual([]);
  expect(await platform.cliLines(['dlq', 'list'])).toEqual([]);
  const listed = await platform.cli(['dlq', 'list']);
  expect(listed.stdout).not.toMatch(/about [1-9]/);
  expect(listed.stderr).not.toContain('does not list');
}

test('--branch without --repo is a usage error', async () => {
  const run = await platform.cli(['doctor', '--branch', 'doctor-scratch']);
  expect([run.code, run.stderr]).toEqual([2, expect.stringMatching(/--branch needs --repo/)]);
});

test('its clean-up cancels a run_tests still running (its build stopped), as "cancel" does, and leaves the workspace ACTIVE', async () => {
  // A run the doctor stopped waiting for (its --timeout passed) while its test command still runs.
  const run = { workspaceId: 'doctor-slow', jobIds: ['doctor-slow-patch', 'doctor-slow-tests'] };
  const [diff] = await diffChain(source, [{ 'slow.txt': 'slow\n' }]);
  await platform.cliJson(
    applyPatchArgs(run.workspaceId, 'doctor-slow-patch', repoUrl, 'doctor-slow', diff ?? '', 'agent-jobs doctor: slow'),
  );
  await platform.cliJson(['wait', 'doctor-slow-patch', '--timeout', '120']);
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    run.workspaceId,
    '--job-id',
    'doctor-slow-tests',
    '--command',
    'sleep 600',
  ]);
  await platform.untilJob('doctor-slow-tests', (job) => job.status === 'RUNNING');

  const connection = connect({ stateDir: platform.stateDir });
  const cleaned = await cleanUpScratchRun(connection, run).finally(() => connection.close());

  expect(cleaned).toMatch(
    /^cleaned up: doctor-slow-tests cancelled \(its build local:doctor-slow-tests:0:[0-9a-f]{16} is stopped; /,
  );
  expect(await platform.cliJson(['status', 'doctor-slow-tests'])).toMatchObject({ status: 'CANCELLED' });
  // The local runner's record of the run (tools/local/test-runner.ts): the command was stopped, not left to end on its own.
  const key = /its build local:doctor-slow-tests:0:([0-9a-f]{16}) /.exec(cleaned ?? '')?.[1] ?? '';
  const runFile = path.join(platform.stateDir, TEST_RUNS_DIR, 'runs', `doctor-slow-tests.0.${key}.json`);
  const runState = async () =>
    (JSON.parse(await readFile(runFile, 'utf8')) as { status: { state: string; status?: string } }).status;
  expect(
    await eventually(runState, (state) => state.state !== 'RUNNING', { what: 'the run of doctor-slow-tests to end' }),
  ).toMatchObject({ state: 'ERROR', status: 'STOPPED' });
  expect(await platform.cliJson(['workspace', 'show', run.workspaceId])).toMatchObject({ state: 'ACTIVE' });
});
