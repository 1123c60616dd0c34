/**
 * A verdict is its own run's, whatever an earlier platform left in the state directory, as a user
 * meets it: `npm start` (the ledger in memory), a failing test run, Ctrl-C, `npm start` again on
 * the same state directory, and the same job id sent again with another command. The new job runs
 * its own command: its verdict, log tail and output are of that run, never the old one's.
 */
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from './harness';

jest.setTimeout(240_000);

const started: RunningPlatform[] = [];

afterAll(async () => {
  for (const platform of started.reverse()) await platform.stop().catch(() => undefined);
  await removeScratch();
});

async function platformWithWorkspace(stateDir?: string): Promise<RunningPlatform> {
  const platform = await startPlatform(stateDir ? { stateDir } : {});
  started.push(platform);
  const source = await makeRepository({ 'app.txt': 'one\n' }, ['fresh']);
  const repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'fresh'])).url;
  const [bind] = await diffChain(source, [{ 'notes.txt': 'fresh\n' }]);
  await platform.cliJson(applyPatchArgs('ws-fresh', 'fresh-bind', repoUrl, 'fresh', bind ?? '', 'Bind the workspace'));
  await platform.cliJson(['wait', 'fresh-bind', '--timeout', '120']);
  return platform;
}

interface TestJob {
  status: string;
  result?: { verdict?: string; logTail?: string; buildId?: string };
}

test('after a restart on an empty ledger, a test job sent again under the same id runs its own command and gets its own verdict', async () => {
  const first = await platformWithWorkspace();
  await first.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-fresh',
    '--job-id',
    'fresh-t1',
    '--command',
    'echo old run; exit 1',
  ]);
  expect((await first.cli(['wait', 'fresh-t1', '--timeout', '120'])).stdout).toMatch(
    /^fresh-t1 +run_tests +tests failed/m,
  );
  await first.stop({ keepStateDir: true });
  started.pop();

  const second = await platformWithWorkspace(first.stateDir);
  await second.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-fresh',
    '--job-id',
    'fresh-t1',
    '--command',
    'echo fresh run; exit 0',
  ]);
  const waited = await second.cli(['wait', 'fresh-t1', '--timeout', '120']);

  expect(waited.stdout).toMatch(/^fresh-t1 +run_tests +tests passed/m);
  const job = await second.cliJson<TestJob>(['status', 'fresh-t1']);
  expect(job).toMatchObject({ status: 'SUCCEEDED', result: { verdict: 'passed' } });
  expect(job.result?.logTail).toBe('fresh run\n');
  const logs = (await second.cli(['logs', 'fresh-t1'])).stdout;
  expect(logs).toContain('fresh run');
  expect(logs).not.toContain('old run');
});
