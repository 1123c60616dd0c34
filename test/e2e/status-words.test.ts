/**
 * What `wait` and `status` print agrees with the job's state, as a user reads it in the terminal:
 * the progress line names a finished test run by its verdict, as the table after it does.
 */
import { applyPatchArgs, diffChain, makeRepository, removeScratch, startPlatform, type RunningPlatform } from './harness';

jest.setTimeout(180_000);

let platform: RunningPlatform;

beforeAll(async () => {
  platform = await startPlatform();
  const source = await makeRepository({ 'app.txt': 'one\n' }, ['words']);
  const repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'words'])).url;
  const [bind] = await diffChain(source, [{ 'notes.txt': 'words\n' }]);
  await platform.cliJson(applyPatchArgs('ws-words', 'words-bind', repoUrl, 'words', bind ?? '', 'Bind the workspace'));
  await platform.cliJson(['wait', 'words-bind', '--timeout', '120']);
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

test("wait's progress line names a failed test run as its table does: tests failed, never SUCCEEDED", async () => {
  await platform.cliJson(['enqueue', '--type', 'run_tests', '--workspace', 'ws-words', '--job-id', 'words-t1', '--command', 'echo red; exit 1']);

  const waited = await platform.cli(['wait', 'words-t1', '--timeout', '120']);

  expect(waited.code).toBe(1);
  expect(waited.stdout).toMatch(/^words-t1 +run_tests +tests failed +/m);
  const progress = waited.stderr.split('\n').filter((line) => line.startsWith('waiting: '));
  expect(progress.at(-1)).toBe('waiting: words-t1=tests failed');
  expect(waited.stderr).not.toMatch(/words-t1=SUCCEEDED/);
});
