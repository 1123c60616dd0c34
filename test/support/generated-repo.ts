/**
 * Generated repositories of any size shaped like a monorepo (areas, packages, `src`, then modules
 * nested deeper as the repository grows), built with git's plumbing: `git fast-import` writes the
 * objects straight into a pack, with no work tree and no index, so 300,000 files take seconds,
 * not the minutes a checkout, `git add` and `git commit` would. For the tests and the benchmarks.
 */
import { spawn } from 'node:child_process';
import { GIT_ENV, git } from './git-fixtures';

const FILES_PER_DIR = 12;
const AREAS = ['services', 'libs', 'apps', 'tools'] as const;
const PACKAGES_PER_AREA = 16;
const MODULES_PER_DIR = 4;

/**
 * Path of file `i`: `<area>/<package>/src/` then modules `m0`..`m3` nested as deep as the index
 * needs (at 100,000 files up to 4 directories under `src`, at 300,000 up to 5), 12 files per
 * directory. A directory holds files and subdirectories side by side, as source trees do.
 */
export function generatedPath(i: number): string {
  let dir = Math.floor(i / FILES_PER_DIR);
  const parts: string[] = [AREAS[dir % AREAS.length] as string];
  dir = Math.floor(dir / AREAS.length);
  parts.push(`pkg${dir % PACKAGES_PER_AREA}`, 'src');
  for (dir = Math.floor(dir / PACKAGES_PER_AREA); dir > 0; dir = Math.floor(dir / MODULES_PER_DIR))
    parts.push(`m${dir % MODULES_PER_DIR}`);
  return [...parts, `file${i % FILES_PER_DIR}.ts`].join('/');
}

/** Content of file `i`: `lines` lines, each distinct across the repository; `edited` replaces the middle one. */
export function generatedContent(i: number, lines: number, edited?: string): string {
  return Array.from(
    { length: lines },
    (_, l) => `export const value${l} = ${l === lines >> 1 && edited !== undefined ? edited : i * lines + l};\n`,
  ).join('');
}

/** Changes of one commit: files written (path to content) and files removed. */
export interface GeneratedEdits {
  readonly write?: Readonly<Record<string, string>>;
  readonly remove?: readonly string[];
}

const AUTHOR = 'Fixture <fixture@example.invalid> 1767225600 +0000';

/**
 * Files of a generated tree: 0 to `files - 1`, or every `stride`-th of them (a tree as deep as the
 * full one, with a fraction of its files: what depends on depth, not size, at a fraction of the cost).
 */
export interface GeneratedFiles {
  readonly files: number;
  readonly lines: number;
  /** @default 1 */
  readonly stride?: number;
}

/**
 * A commit on `branch` (a branch name, or a full ref such as `refs/bench/one`) of the bare
 * repository `gitDir` made with fast-import: on top of `parent` with `edits`, or (no parent)
 * holding exactly the files `change` names with `lines` lines each. Returns its id.
 */
export async function fastImportCommit(
  gitDir: string,
  branch: string,
  change: { parent: string; edits: GeneratedEdits } | GeneratedFiles,
  message = 'generated',
): Promise<string> {
  const ref = branch.startsWith('refs/') ? branch : `refs/heads/${branch}`;
  const child = spawn('git', ['fast-import', '--quiet', '--done'], {
    cwd: gitDir,
    env: { ...GIT_ENV, GIT_DIR: gitDir },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`git fast-import exited with ${String(code)}: ${stderr}`)),
    );
  });
  const write = (text: string) =>
    child.stdin.write(text) ? Promise.resolve() : new Promise<void>((resolve) => child.stdin.once('drain', resolve));
  const inline = (path: string, content: string) =>
    `M 100644 inline ${path}\ndata ${Buffer.byteLength(content)}\n${content}\n`;
  await write(`commit ${ref}\nauthor ${AUTHOR}\ncommitter ${AUTHOR}\ndata ${Buffer.byteLength(message)}\n${message}\n`);
  if ('parent' in change) {
    await write(`from ${change.parent}\n`);
    for (const path of change.edits.remove ?? []) await write(`D ${path}\n`);
    for (const [path, content] of Object.entries(change.edits.write ?? {})) await write(inline(path, content));
  } else {
    for (let i = 0; i < change.files; i += change.stride ?? 1)
      await write(inline(generatedPath(i), generatedContent(i, change.lines)));
  }
  await write('\ndone\n');
  child.stdin.end();
  await exited;
  return git(gitDir, 'rev-parse', ref);
}

/** A new bare repository at `gitDir` whose `main` holds `files` generated files of `lines` lines (every `stride`-th of them). Returns the commit. */
export async function generateRepository(gitDir: string, files: number, lines: number, stride = 1): Promise<string> {
  await git('/', 'init', '--quiet', '--bare', '--initial-branch=main', gitDir);
  return fastImportCommit(gitDir, 'main', { files, lines, stride });
}

/** The `git diff` (renames found) from `base` to the commit `edits` make on top of it, as an agent sends it. */
export async function generatedDiff(
  gitDir: string,
  base: string,
  edits: GeneratedEdits,
  branch = 'agent-edit',
): Promise<string> {
  const edited = await fastImportCommit(gitDir, branch, { parent: base, edits });
  return `${await git(gitDir, 'diff', '--no-color', '-M', base, edited)}\n`;
}
