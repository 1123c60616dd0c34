/**
 * The local platform driven only through the CLI: ordered patches, a duplicate send, a failing and
 * a passing test run, a pull request, and `--json` output that is JSON and nothing else.
 */
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import {
  applyPatchArgs,
  diffChain,
  git,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from './harness';
import { repositoryDir } from '../../tools/local/state-dir';

jest.setTimeout(180_000);

interface JobJson {
  jobId: string;
  status: string;
  result?: Record<string, unknown>;
  pin?: { sha: string };
}

let platform: RunningPlatform;
let source: string;
let repoUrl: string;

beforeAll(async () => {
  platform = await startPlatform();
  source = await makeRepository({ 'README.md': '# app\n' }, ['ordered', 'dup', 'feature', 'json']);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'app'])).url;
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

async function remoteHead(branch: string): Promise<string> {
  // From the state directory: the platform's git server lets in only the platform and test checkouts.
  return git(repositoryDir(platform.stateDir, 'app'), 'rev-parse', `refs/heads/${branch}`);
}

test('apply_patch A then B: two commits, in order, and the ledger names the head', async () => {
  const [a, b] = await diffChain(source, [{ 'notes.txt': 'A\n' }, { 'notes.txt': 'A\nB\n' }]);
  await platform.cliJson(applyPatchArgs('ws-ordered', 'ordered-a', repoUrl, 'ordered', a ?? '', 'Patch A'));
  await platform.cliJson(applyPatchArgs('ws-ordered', 'ordered-b', repoUrl, 'ordered', b ?? '', 'Patch B'));

  const waited = await platform.cliLines<{ jobId: string; succeeded: boolean }>([
    'wait',
    'ordered-a',
    'ordered-b',
    '--timeout',
    '120',
  ]);

  expect(waited.map((j) => [j.jobId, j.succeeded])).toEqual([
    ['ordered-a', true],
    ['ordered-b', true],
  ]);
  expect(await platform.remoteLog(repoUrl, 'ordered')).toEqual(['Patch B', 'Patch A', 'initial']);
  const jobB = await platform.cliJson<JobJson>(['status', 'ordered-b']);
  expect(jobB.result?.commitSha).toBe(await remoteHead('ordered'));
  const workspace = await platform.cliJson<{ head: string; state: string }>(['workspace', 'show', 'ws-ordered']);
  expect(workspace).toMatchObject({ head: await remoteHead('ordered'), state: 'ACTIVE' });
  const listed = await platform.cliLines<JobJson>(['jobs', '--workspace', 'ws-ordered']);
  expect(listed.map((j) => j.jobId)).toEqual(['ordered-a', 'ordered-b']);
  const succeeded = (await platform.events()).filter(
    (e) => e.type === 'AgentJobSucceeded' && e.detail.workspaceId === 'ws-ordered',
  );
  expect(succeeded.map((e) => e.detail.jobId)).toEqual(['ordered-a', 'ordered-b']);
});

test('the same job enqueued twice makes one commit', async () => {
  const [diff] = await diffChain(source, [{ 'dup.txt': 'once\n' }]);
  const args = applyPatchArgs('ws-dup', 'dup-1', repoUrl, 'dup', diff ?? '', 'Only once');
  const first = await platform.cliJson<{ jobId: string }>(args);
  const second = await platform.cliJson<{ jobId: string }>(args);
  expect(second.jobId).toBe(first.jobId);

  await platform.cliJson(['wait', 'dup-1', '--timeout', '120']);
  // A third send after the job finished (inside SQS's 5-minute dedup window, so SQS drops it; the
  // ledger and the commit trailer cover later resends: integration tests of the sequencer).
  await platform.cliJson(args);
  await platform.cliJson(['wait', 'dup-1', '--timeout', '120']);

  expect(await platform.remoteLog(repoUrl, 'dup')).toEqual(['Only once', 'initial']);
  expect((await platform.cliLines<JobJson>(['jobs', '--workspace', 'ws-dup'])).map((j) => j.jobId)).toEqual(['dup-1']);
});

test('run_tests fails then passes at the pinned commits, then open_pr opens one pull request', async () => {
  const [broken, fixed] = await diffChain(source, [{ 'test.sh': 'exit 1\n' }, { 'test.sh': 'echo ok\n' }]);
  const tests = (jobId: string) => [
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-feature',
    '--job-id',
    jobId,
    '--command',
    'sh test.sh',
  ];
  await platform.cliJson(
    applyPatchArgs('ws-feature', 'feature-1', repoUrl, 'feature', broken ?? '', 'Add failing test'),
  );
  await platform.cliJson(tests('tests-1'));
  await platform.cliJson(applyPatchArgs('ws-feature', 'feature-2', repoUrl, 'feature', fixed ?? '', 'Fix the test'));
  await platform.cliJson(tests('tests-2'));
  await platform.cliJson([
    'enqueue',
    '--type',
    'open_pr',
    '--workspace',
    'ws-feature',
    '--job-id',
    'feature-pr',
    '--base',
    'main',
    '--title',
    'Feature',
  ]);

  const waited = await platform.cli([
    'wait',
    'feature-1',
    'tests-1',
    'feature-2',
    'tests-2',
    'feature-pr',
    '--timeout',
    '150',
    '--json',
  ]);

  expect(waited.code).toBe(1); // the first test run failed
  const [feature1, tests1, feature2, tests2, pr] = await Promise.all(
    ['feature-1', 'tests-1', 'feature-2', 'tests-2', 'feature-pr'].map((id) =>
      platform.cliJson<JobJson>(['status', id]),
    ),
  );
  expect(tests1).toMatchObject({
    status: 'SUCCEEDED',
    result: { verdict: 'failed', sha: feature1?.result?.commitSha },
  });
  expect(tests2).toMatchObject({
    status: 'SUCCEEDED',
    result: { verdict: 'passed', sha: feature2?.result?.commitSha },
  });
  expect(pr).toMatchObject({ status: 'SUCCEEDED', pin: { sha: feature2?.result?.commitSha } });
  const store = JSON.parse(await readFile(path.join(platform.stateDir, 'pull-requests.json'), 'utf8')) as {
    pulls: { head: string; base: string; title: string }[];
  };
  expect(store.pulls).toEqual([expect.objectContaining({ head: 'feature', base: 'main', title: 'Feature' })]);
});

test('--json: stdout is JSON Lines (one object per line) and nothing else, for every kind of command', async () => {
  const [diff] = await diffChain(source, [{ 'json.txt': 'json\n' }]);
  await platform.cliJson(applyPatchArgs('ws-json', 'json-a', repoUrl, 'json', diff ?? '', 'For --json'));
  await platform.cliJson(['wait', 'json-a', '--timeout', '120']);
  const commands = [
    ['--help'],
    ['status', 'json-a'],
    ['wait', 'json-a'],
    ['jobs', '--workspace', 'ws-json'],
    ['workspace', 'show', 'ws-json'],
    ['dlq', 'list'],
    ['dlq', 'redrive', '--queue', 'open-pr'],
    ['enqueue', '--type', 'run_tests', '--workspace', 'ws-json', '--command', 'true'],
  ];
  for (const command of commands) {
    const result = await platform.cli([...command, '--json']);
    expect({ command, code: result.code }).toEqual({ command, code: 0 });
    for (const line of result.stdout.split('\n').filter(Boolean)) expect(JSON.parse(line)).toEqual(expect.any(Object));
  }
  const fromStdin = await platform.cliJson<{ jobId: string; type: string; tenantId: string }>(
    ['enqueue', '-'],
    JSON.stringify({ type: 'run_tests', workspaceId: 'ws-json', jobId: 'stdin-1', payload: { command: 'true' } }),
  );
  expect(fromStdin).toMatchObject({ jobId: 'stdin-1', type: 'run_tests', tenantId: 'default' });
  const failed = await platform.cli(['status', 'no-such-job', '--json']);
  expect(failed.code).toBe(3);
  expect(failed.stdout).toBe('');
  expect(JSON.parse(failed.stderr.trim().split('\n').at(-1) ?? '')).toMatchObject({
    error: { message: expect.stringContaining('no-such-job') },
  });
});
