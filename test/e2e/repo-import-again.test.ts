/**
 * `repo import` of a name imported before, as a user meets it: the source grew a branch since. The
 * new branch is imported and named; a branch the server has already stays as it is there (it may
 * carry the platform's commits), and the note says so.
 */
import { git, makeRepository, removeScratch, startPlatform, type RunningPlatform } from './harness';

jest.setTimeout(120_000);

let platform: RunningPlatform;

beforeAll(async () => {
  platform = await startPlatform();
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

interface Imported {
  url: string;
  created: boolean;
  addedBranches?: string[];
}

test('a repository imported again gets the branches its source has grown since, and keeps the ones it has', async () => {
  const source = await makeRepository({ 'app.txt': 'one\n' });
  const first = await platform.cliJson<Imported>(['repo', 'import', source, '--name', 'grown']);
  await git(source, 'branch', 'feature');
  await git(
    source,
    '-c',
    'user.name=e2e',
    '-c',
    'user.email=e2e@example.com',
    'commit',
    '--quiet',
    '--allow-empty',
    '-m',
    'later on main',
  );

  const again = await platform.cli(['repo', 'import', source, '--name', 'grown', '--json']);

  expect(again.code).toBe(0);
  expect(JSON.parse(again.stdout)).toMatchObject({ url: first.url, created: false, addedBranches: ['feature'] });
  expect(again.stderr).toMatch(
    /repository grown was imported before: added branch feature from .*; kept branch main as it is here/,
  );
  expect(await platform.remoteLog(first.url, 'feature')).toEqual(['initial']);
  // main stays as the server has it: the source's later commit is not taken over it.
  expect(await platform.remoteLog(first.url, 'main')).toEqual(['initial']);
});
