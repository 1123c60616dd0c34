/**
 * The catalog's gate on the local platform, through the CLI: open_pr requires run_tests (its
 * `requires`), judged at the commit the pull request was pinned to. A failed test run there opens
 * nothing and says which job, verdict and commit; a later patch that moves the head does not change
 * the judgement of a pull request pinned before it; a run still going is waited for; a workspace
 * with no test run at the commit opens nothing either.
 */
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
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
  result?: Record<string, unknown>;
  error?: { reason: string; message: string };
  pin?: { sha: string };
  gate?: string;
}

let platform: RunningPlatform;
let source: string;
let repoUrl: string;

beforeAll(async () => {
  platform = await startPlatform();
  source = await makeRepository({ 'README.md': '# app\n' }, ['red', 'slow', 'untested']);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'app'])).url;
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

const tests = (workspace: string, jobId: string) => [
  'enqueue',
  '--type',
  'run_tests',
  '--workspace',
  workspace,
  '--job-id',
  jobId,
  '--command',
  'sh test.sh',
];
const openPr = (workspace: string, jobId: string, title: string) => [
  'enqueue',
  '--type',
  'open_pr',
  '--workspace',
  workspace,
  '--job-id',
  jobId,
  '--base',
  'main',
  '--title',
  title,
];

async function pulls(): Promise<{ head: string; title: string }[]> {
  const file = path.join(platform.stateDir, 'pull-requests.json');
  const text = await readFile(file, 'utf8').catch(() => '{"pulls":[]}');
  return (JSON.parse(text) as { pulls: { head: string; title: string }[] }).pulls;
}

test('failed tests at the pinned commit: open_pr opens nothing, names the job, its verdict and commit; a later patch moves the head, the fixed commit opens one', async () => {
  const [broken, fixed] = await diffChain(source, [{ 'test.sh': 'exit 1\n' }, { 'test.sh': 'echo ok\n' }]);
  await platform.cliJson(applyPatchArgs('ws-red', 'red-1', repoUrl, 'red', broken ?? '', 'Add failing test'));
  await platform.cliJson(tests('ws-red', 'red-tests-1'));
  await platform.cliJson(openPr('ws-red', 'red-pr-1', 'Too early'));
  // Sent before red-pr-1 ran, perhaps: the pull request stays judged at the commit it was pinned to.
  await platform.cliJson(applyPatchArgs('ws-red', 'red-2', repoUrl, 'red', fixed ?? '', 'Fix the test'));
  await platform.cliJson(tests('ws-red', 'red-tests-2'));
  await platform.cliJson(openPr('ws-red', 'red-pr-2', 'Green'));

  await platform.cli([
    'wait',
    'red-1',
    'red-tests-1',
    'red-pr-1',
    'red-2',
    'red-tests-2',
    'red-pr-2',
    '--timeout',
    '200',
    '--json',
  ]);

  const [red1, pr1, red2, pr2] = await Promise.all(
    ['red-1', 'red-pr-1', 'red-2', 'red-pr-2'].map((id) => platform.cliJson<JobJson>(['status', id])),
  );
  const sha1 = String(red1?.result?.commitSha);
  expect(pr1).toMatchObject({ status: 'FAILED', pin: { sha: sha1 }, error: { reason: 'REQUIREMENT_FAILED' } });
  expect(pr1?.error?.message).toContain('red-tests-1');
  expect(pr1?.error?.message).toContain('tests failed');
  expect(pr1?.error?.message).toContain(sha1);
  expect(pr1?.gate).toBe(`failed: run_tests red-tests-1 (tests failed) at ${sha1.slice(0, 12)}: nothing was done`);
  expect(pr2).toMatchObject({ status: 'SUCCEEDED', pin: { sha: red2?.result?.commitSha } });
  expect((await pulls()).filter((p) => p.head === 'red').map((p) => p.title)).toEqual(['Green']);
  const failed = (await platform.events()).find((e) => e.type === 'AgentJobFailed' && e.detail.jobId === 'red-pr-1');
  expect(failed?.detail).toMatchObject({ reason: 'REQUIREMENT_FAILED', message: pr1?.error?.message });
});

test('tests still running at the pinned commit: open_pr waits for their verdict, then opens', async () => {
  const [slow] = await diffChain(source, [{ 'test.sh': 'sleep 4\necho ok\n' }]);
  await platform.cliJson(applyPatchArgs('ws-slow', 'slow-1', repoUrl, 'slow', slow ?? '', 'A slow test'));
  await platform.cliJson(tests('ws-slow', 'slow-tests'));
  await platform.cliJson(openPr('ws-slow', 'slow-pr', 'Slow'));

  const waited = await platform.cli(['wait', 'slow-1', 'slow-tests', 'slow-pr', '--timeout', '200', '--json']);

  expect(waited.code).toBe(0);
  const [tested, pr] = await Promise.all(
    ['slow-tests', 'slow-pr'].map((id) => platform.cliJson<JobJson>(['status', id])),
  );
  expect(tested).toMatchObject({ status: 'SUCCEEDED', result: { verdict: 'passed' } });
  expect(pr).toMatchObject({
    status: 'SUCCEEDED',
    result: { gate: [{ type: 'run_tests', jobId: 'slow-tests', verdict: 'tests passed' }] },
  });
  expect(pr?.gate).toMatch(/^passed: run_tests slow-tests \(tests passed\) at [0-9a-f]{12}$/);
});

test('no test run at the pinned commit: open_pr opens nothing and says what it required', async () => {
  const [change] = await diffChain(source, [{ 'notes.txt': 'untested\n' }]);
  await platform.cliJson(
    applyPatchArgs('ws-untested', 'untested-1', repoUrl, 'untested', change ?? '', 'Untested change'),
  );
  await platform.cliJson(openPr('ws-untested', 'untested-pr', 'Untested'));

  await platform.cli(['wait', 'untested-1', 'untested-pr', '--timeout', '200', '--json']);

  const pr = await platform.cliJson<JobJson>(['status', 'untested-pr']);
  expect(pr).toMatchObject({ status: 'FAILED', error: { reason: 'REQUIREMENT_NOT_RUN' } });
  expect(pr.error?.message).toContain('run_tests');
  expect(pr.gate).toBe(`not run: no run_tests job at ${pr.pin?.sha.slice(0, 12)} before it: nothing was done`);
  expect((await pulls()).filter((p) => p.head === 'untested')).toEqual([]);
});
