/**
 * What `wait` and `status` print agrees with the job's state, as a user reads it in the terminal:
 * the progress line names a finished test run by its verdict, as the table after it does; status
 * shows the command a test run ran.
 */
import { DEFAULT_TEST_COMMAND } from '../../contract/job-types';
import {
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
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-words',
    '--job-id',
    'words-t1',
    '--command',
    'echo red; exit 1',
  ]);

  const waited = await platform.cli(['wait', 'words-t1', '--timeout', '120']);

  expect(waited.code).toBe(1);
  expect(waited.stdout).toMatch(/^words-t1 +run_tests +tests failed +/m);
  const progress = waited.stderr.split('\n').filter((line) => line.startsWith('waiting: '));
  expect(progress.at(-1)).toBe('waiting: words-t1=tests failed');
  expect(waited.stderr).not.toMatch(/words-t1=SUCCEEDED/);
});

test('status shows the command a test run ran, and the default it ran when the job named none', async () => {
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-words',
    '--job-id',
    'words-named',
    '--command',
    'echo green',
  ]);
  await platform.cliJson(['enqueue', '--type', 'run_tests', '--workspace', 'ws-words', '--job-id', 'words-default']);
  // The repository has no test script: the default ends 'tests not configured' (wait exits 1).
  expect((await platform.cli(['wait', 'words-named', 'words-default', '--timeout', '120'])).stdout).toMatch(
    /words-default +run_tests +tests not configured/,
  );

  expect(await platform.cliJson(['status', 'words-named'])).toMatchObject({ command: 'echo green' });
  expect((await platform.cli(['status', 'words-named'])).stdout).toMatch(/^command +echo green$/m);
  expect(await platform.cliJson(['status', 'words-default'])).toMatchObject({
    command: DEFAULT_TEST_COMMAND,
    commandIsDefault: true,
  });
  const shown = (await platform.cli(['status', 'words-default'])).stdout;
  expect(
    shown
      .split('\n')
      .find((line) => line.startsWith('command '))
      ?.replace(/^command +/, ''),
  ).toBe(`${DEFAULT_TEST_COMMAND} (the stage's default: the job named none)`);
});
