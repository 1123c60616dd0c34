/**
 * Test helpers that build real repositories and diffs with the git CLI, so the patch engine is
 * checked against what git itself produces and applies.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Fixed identity and no user or system config, so results do not depend on the machine. */
export const GIT_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'Fixture',
  GIT_AUTHOR_EMAIL: 'fixture@example.invalid',
  GIT_AUTHOR_DATE: '2026-01-01T00:00:00Z',
  GIT_COMMITTER_NAME: 'Fixture',
  GIT_COMMITTER_EMAIL: 'fixture@example.invalid',
  GIT_COMMITTER_DATE: '2026-01-01T00:00:00Z',
  GIT_TERMINAL_PROMPT: '0',
  // No automatic gc: after a commit of thousands of files it packs the repository in the
  // background, deleting loose objects while a clone of it may still be copying them.
  GIT_CONFIG_COUNT: '1',
  GIT_CONFIG_KEY_0: 'gc.auto',
  GIT_CONFIG_VALUE_0: '0',
};

/** Runs git in `cwd` and returns its stdout without the trailing newline. */
export async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('git', args, { cwd, env: GIT_ENV, maxBuffer: 64 * 1024 * 1024 });
  return stdout.replace(/\n$/, '');
}

/** Runs git in `cwd` with `input` on its stdin; returns its stdout without the trailing newline. */
function gitWithInput(cwd: string, input: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile('git', args, { cwd, env: GIT_ENV }, (error, stdout) =>
      error ? reject(error) : resolve(stdout.replace(/\n$/, '')),
    );
    child.stdin?.end(input);
  });
}

/**
 * Commits on `branch` of a bare repository a top-level file under a name a tree may hold but some
 * checkouts refuse (`docs\notes.md`, pushed from another system), with git's plumbing, as a
 * checkout-less host would store it. Returns the new commit.
 */
export async function commitRawEntry(gitDir: string, branch: string, name: string, content: string): Promise<string> {
  const blob = await gitWithInput(gitDir, content, 'hash-object', '-w', '--stdin');
  // NUL-terminated both ways: names are taken as they are, never quoted.
  const entries = await git(gitDir, 'ls-tree', '-z', branch);
  const tree = await gitWithInput(gitDir, `${entries}100644 blob ${blob}\t${name}\0`, 'mktree', '-z');
  const commit = await git(gitDir, 'commit-tree', tree, '-p', branch, '-m', `add ${name}`);
  await git(gitDir, 'update-ref', `refs/heads/${branch}`, commit);
  return commit;
}

export async function tempDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `agent-jobs-${prefix}-`));
}

export async function removeDir(dir: string): Promise<void> {
  // Retries ENOTEMPTY: a git child may still be finishing writes (seen under heavy load).
  await rm(dir, { recursive: true, force: true, maxRetries: 5 });
}

/** A file's content; `mode: 'exec'` makes it 100755, `symlink` makes a symlink to `content`. */
export type FileSpec = string | Buffer | { readonly content: string | Buffer; readonly mode: 'exec' | 'symlink' };

export async function writeFiles(dir: string, files: Record<string, FileSpec>): Promise<void> {
  for (const [path, spec] of Object.entries(files)) {
    const file = join(dir, path);
    await mkdir(dirname(file), { recursive: true });
    if (typeof spec === 'string' || Buffer.isBuffer(spec)) await writeFile(file, spec);
    else if (spec.mode === 'symlink') await symlink(spec.content.toString(), file);
    else {
      await writeFile(file, spec.content);
      await chmod(file, 0o755);
    }
  }
}

/** A new repository with one commit holding `files` on `branch`. Returns the commit sha. */
export async function createRepo(dir: string, files: Record<string, FileSpec>, branch = 'main'): Promise<string> {
  await git(dir, 'init', '--quiet', `--initial-branch=${branch}`);
  // The fixture must hold the bytes it was given: no line-ending conversion.
  await git(dir, 'config', 'core.autocrlf', 'false');
  await writeFiles(dir, files);
  await git(dir, 'add', '--all');
  await git(dir, 'commit', '--quiet', '--message', 'base');
  return git(dir, 'rev-parse', 'HEAD');
}

/** Commits `files` on the checked-out branch of `dir`; returns the new commit sha. */
export async function commitFiles(dir: string, files: Record<string, FileSpec>, message: string): Promise<string> {
  await writeFiles(dir, files);
  await git(dir, 'add', '--all');
  await git(dir, 'commit', '--quiet', '--message', message);
  return git(dir, 'rev-parse', 'HEAD');
}

/**
 * The `git diff` of the edits `edit` makes in a fresh clone of `repoDir` at `sha` (rename detection
 * on by default, as agents produce it). The clone is removed afterwards.
 */
export async function diffOfEdits(
  repoDir: string,
  sha: string,
  edit: (workTree: string) => Promise<void>,
  diffOptions: readonly string[] = ['-M'],
): Promise<string> {
  const work = await tempDir('diff');
  try {
    await git(work, 'clone', '--quiet', '--no-checkout', repoDir, '.');
    await git(work, 'config', 'core.autocrlf', 'false');
    await git(work, 'checkout', '--quiet', '--detach', sha);
    await edit(work);
    await git(work, 'add', '--all');
    return `${await git(work, 'diff', '--cached', '--no-color', ...diffOptions)}\n`;
  } finally {
    await removeDir(work);
  }
}

/**
 * The tree `git apply --index` makes of `diff` on commit `sha` of the repository at `gitDir`,
 * computed in a temporary index (`read-tree` + `git apply --cached`: the same index result as
 * `--index`, without a work tree).
 */
export async function gitApplyTree(gitDir: string, sha: string, diff: string | Uint8Array): Promise<string> {
  const dir = await tempDir('apply');
  const env = { ...GIT_ENV, GIT_DIR: gitDir, GIT_INDEX_FILE: join(dir, 'index') };
  const inRepo = async (...args: string[]) => (await run('git', args, { cwd: dir, env })).stdout.trim();
  try {
    await writeFile(join(dir, 'patch.diff'), diff);
    await inRepo('read-tree', sha);
    await inRepo('apply', '--cached', join(dir, 'patch.diff'));
    return await inRepo('write-tree');
  } finally {
    await removeDir(dir);
  }
}

/**
 * A `git diff` adding one file (`path`), exactly `bytes` long: lines of 100 bytes, the last one
 * shortened to fit (the hunk header names the line count, so it is found by a few tries).
 */
export function newFileDiffOf(bytes: number, path = 'big.txt'): Buffer {
  const head = (lines: number) =>
    `diff --git a/${path} b/${path}\nnew file mode 100644\n--- /dev/null\n+++ b/${path}\n@@ -0,0 +1,${lines} @@\n`;
  const line = `+${'x'.repeat(98)}\n`;
  for (let lines = Math.ceil(bytes / line.length); lines > 0; lines--) {
    const rest = bytes - Buffer.byteLength(head(lines)) - (lines - 1) * line.length;
    // The last line: at least "+\n", at most a whole one.
    if (rest >= 2 && rest <= line.length)
      return Buffer.from(head(lines) + line.repeat(lines - 1) + `+${'y'.repeat(rest - 2)}\n`);
  }
  throw new Error(`no new-file diff of ${bytes} bytes`);
}
