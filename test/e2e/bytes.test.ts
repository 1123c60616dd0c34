/**
 * A patch reaches the tree byte for byte through the CLI on the local platform: `enqueue
 * --diff-file` with a diff holding Latin-1 bytes (it was read as UTF-8 and committed U+FFFD) and
 * an emoji (fauxqs refused the message: characters outside the BMP).
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { repositoryDir } from '../../tools/local/state-dir';
import { applyPatchArgs, git, makeRepository, removeScratch, startPlatform, type RunningPlatform } from './harness';

jest.setTimeout(180_000);
const execFileP = promisify(execFile);

let platform: RunningPlatform;

beforeAll(async () => {
  platform = await startPlatform();
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

/** Runs git and returns stdout as bytes (a diff of a Latin-1 file is not UTF-8). */
async function gitBytes(cwd: string, ...args: string[]): Promise<Buffer> {
  const { stdout } = await execFileP('git', args, { cwd, encoding: 'buffer' });
  return stdout;
}

test('enqueue --diff-file with Latin-1 bytes and an emoji: the branch gets exactly the tree git made', async () => {
  const source = await makeRepository(
    { 'legacy.txt': Buffer.from('caf\xe9\nna\xefve\n', 'latin1'), 'README.md': '# app\n' },
    ['bytes'],
  );
  const repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'bytes'])).url;
  // The agent's edit, made and diffed with git itself in the source repository.
  await git(source, 'checkout', '--quiet', 'bytes');
  await writeFile(path.join(source, 'legacy.txt'), Buffer.from('caf\xe9 cr\xe8me br\xfbl\xe9e\nna\xefve\n', 'latin1'));
  await writeFile(path.join(source, 'launch.md'), 'ship it \u{1f680}\n');
  await git(source, 'add', '-A');
  const diff = await gitBytes(source, 'diff', '--cached', '--no-color');
  expect(diff.includes(Buffer.from([0xe8]))).toBe(true);
  const diffFile = path.join(source, '..', 'bytes.diff');
  await writeFile(diffFile, diff);
  const expectedTree = await git(source, 'write-tree');

  await platform.cliJson(
    applyPatchArgs('ws-bytes', 'bytes-1', repoUrl, 'bytes', diffFile, 'Edit a Latin-1 file \u{1f680}'),
  );
  const waited = await platform.cliJson<{ succeeded: boolean }>(['wait', 'bytes-1', '--timeout', '120']);

  expect(waited.succeeded).toBe(true);
  // Read in the state directory: the platform's git server lets in only the platform and test checkouts.
  const remote = repositoryDir(platform.stateDir, 'bytes');
  expect(await git(remote, 'rev-parse', 'refs/heads/bytes^{tree}')).toBe(expectedTree);
  expect(
    (await gitBytes(remote, 'show', 'refs/heads/bytes:legacy.txt')).equals(
      Buffer.from('caf\xe9 cr\xe8me br\xfbl\xe9e\nna\xefve\n', 'latin1'),
    ),
  ).toBe(true);
  expect(await git(remote, 'log', '-1', '--format=%s', 'refs/heads/bytes')).toBe('Edit a Latin-1 file \u{1f680}');
});
