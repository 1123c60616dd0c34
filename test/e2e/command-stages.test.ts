/**
 * Command stages on the local platform, driven only through the CLI: the run_tests job starts its
 * build and acknowledges, the child process's exit comes back as the build's completion event and
 * records the verdict, with no function waiting and no cap on the declared build timeout; run_lint,
 * declared in the catalog and nothing else, runs the same way with its own default and wording.
 */
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from './harness';

jest.setTimeout(180_000);

interface JobJson {
  jobId: string;
  status: string;
  result?: Record<string, unknown>;
  error?: { reason: string; message: string };
  pin?: { sha: string };
}

let platform: RunningPlatform;
let repoUrl: string;
let source: string;

beforeAll(async () => {
  platform = await startPlatform();
  source = await makeRepository(
    { 'README.md': '# app\n', 'lint.sh': 'grep -q "^# app$" README.md && echo "lint clean"\n' },
    ['stages'],
  );
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'stages'])).url;
  const [bind] = await diffChain(source, [{ 'notes.txt': 'stages\n' }]);
  await platform.cliJson(
    applyPatchArgs('ws-stages', 'stages-bind', repoUrl, 'stages', bind ?? '', 'Bind the workspace'),
  );
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

test('a build declared to run two hours (a short command) is accepted, runs and completes by event', async () => {
  const enqueued = await platform.cli([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-stages',
    '--job-id',
    'long-tests',
    '--command',
    'echo quick',
    '--timeout-seconds',
    String(2 * 3600),
    '--json',
  ]);
  expect({ code: enqueued.code, stderr: enqueued.stderr }).toEqual({
    code: 0,
    stderr: expect.stringMatching(/^enqueued run_tests long-tests/),
  });

  const waited = await platform.cli(['wait', 'stages-bind', 'long-tests', '--timeout', '120', '--json']);

  expect(waited.code).toBe(0);
  const job = await platform.cliJson<JobJson>(['status', 'long-tests']);
  expect(job).toMatchObject({
    status: 'SUCCEEDED',
    result: { verdict: 'passed', summary: 'tests passed', exitCode: 0, logTail: 'quick\n' },
  });
  expect(job.result?.['buildId']).toMatch(/^local:long-tests:0:[0-9a-f]{16}$/);
  const outcomes = (await platform.events()).filter((e) => e.detail['jobId'] === 'long-tests').map((e) => e.type);
  expect(outcomes).toEqual(['AgentJobSucceeded']);
});

test('run_lint runs lint.sh by default and reports "lint passed"; a failing lint command is a verdict, not an error', async () => {
  await platform.cliJson(['enqueue', '--type', 'run_lint', '--workspace', 'ws-stages', '--job-id', 'lint-default']);
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_lint',
    '--workspace',
    'ws-stages',
    '--job-id',
    'lint-failing',
    '--command',
    'echo "2 problems"; exit 1',
  ]);

  const waited = await platform.cli(['wait', 'lint-default', 'lint-failing', '--timeout', '120']);

  // 1: both finished, not both green.
  expect(waited.code).toBe(1);
  expect(await platform.cliJson<JobJson>(['status', 'lint-default'])).toMatchObject({
    status: 'SUCCEEDED',
    result: {
      verdict: 'passed',
      summary: 'lint passed',
      exitCode: 0,
      logTail: 'lint clean\n',
      buildId: expect.stringMatching(/^local:lint-default:0:[0-9a-f]{16}$/),
    },
  });
  expect(await platform.cliJson<JobJson>(['status', 'lint-failing'])).toMatchObject({
    status: 'SUCCEEDED',
    result: { verdict: 'failed', summary: 'lint failed', exitCode: 1, logTail: '2 problems\n' },
  });
  expect((await platform.cli(['status', 'lint-failing'])).stdout).toMatch(/^status\s+lint failed$/m);
});
