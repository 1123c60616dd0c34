/**
 * The git adapter bundled the stack's way, as the sequencer's asset carries it in a file of its
 * own (git-engine.js, from src/compose/aws-git-engine.ts): esbuild with the stack's ESM_ALIASES takes isomorphic-git from
 * its ES module build, with Node's zlib and crypto in place of pako and sha.js, while tests and the
 * local platform load its CommonJS build. Both must commit the same thing: the bundled adapter
 * applies a diff of edits, deletions and a rename cold and with a repository cache, and its
 * commits equal those the source adapter makes of the same jobs on a copy of the remote (same
 * hashes), pass `git fsck --strict`, and hold the tree `git apply` makes. And the errors it throws,
 * made by its own copy of src/core/errors.ts, are the classes the pipeline's copy knows.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { build } from 'esbuild';
import { stackEsbuildOptions } from '../../lib/constructs/worker';
import * as source from '../../src/adapters/git';
import { PermanentJobError } from '../../src/core/errors';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import { createRepo, diffOfEdits, git, gitApplyTree, removeDir, tempDir, writeFiles } from '../support/git-fixtures';

const ROOT = join(__dirname, '..', '..');

let root: string;
let server: GitServer;
let sourceDir: string;
let baseSha: string;
let bundled: typeof source;
let bundledInputs: string[];

beforeAll(async () => {
  root = await tempDir('bundled-git');
  const outfile = join(root, 'bundle', 'git.js');
  const result = await build({
    entryPoints: [join(ROOT, 'src/adapters/git/index.ts')],
    outfile,
    ...stackEsbuildOptions(ROOT),
    metafile: true,
  });
  bundledInputs = Object.keys(result.metafile.inputs);
  bundled = require(outfile) as typeof source;
  sourceDir = join(root, 'source');
  await mkdir(sourceDir);
  const files: Record<string, string> = {};
  for (let i = 0; i < 120; i++) files[`pkg${i % 8}/file${i}.txt`] = `file ${i}\n`.repeat(30);
  baseSha = await createRepo(sourceDir, files);
  server = await startGitServer({ root: join(root, 'repos') });
}, 120_000);

afterAll(async () => {
  await server?.close();
  await removeDir(root);
});

it('bundles the ES module build of isomorphic-git, not the CommonJS one', () => {
  expect(bundledInputs).toContain('node_modules/isomorphic-git/index.js');
  expect(bundledInputs).not.toContain('node_modules/isomorphic-git/index.cjs');
});

it('takes zlib and SHA-1 from the runtime in place of pako and sha.js (lib/bundling)', () => {
  expect(bundledInputs.filter((input) => /node_modules\/(pako|sha\.js)\//.test(input))).toEqual([]);
  expect(bundledInputs).toEqual(
    expect.arrayContaining(['lib/bundling/pako-node-zlib.ts', 'lib/bundling/sha1-node-crypto.ts']),
  );
});

it('commits what the source adapter commits, cold and from its repository cache', async () => {
  const first = await diffOfEdits(sourceDir, baseSha, async (dir) => {
    await writeFiles(dir, { 'pkg1/file1.txt': 'edited\n', 'pkg2/added.txt': 'added\n' });
    await git(dir, 'rm', '--quiet', 'pkg3/file3.txt');
    await git(dir, 'mv', 'pkg4/file4.txt', 'pkg4/renamed.txt');
  });
  const second = await diffOfEdits(sourceDir, baseSha, (dir) =>
    writeFiles(dir, { 'pkg5/file5.txt': 'edited again\n' }),
  );
  const job = (url: string, n: number, diff: string, base: string) => ({
    repoUrl: url,
    branch: 'main',
    diff,
    baseSha: base,
    jobId: `job-${n}`,
    message: `Job ${n}`,
    createdAt: '2026-03-01T12:00:00.000Z',
    workDir: root,
  });
  /** Two jobs in a row on a fresh remote; the second also through the cache when one is given. */
  const twoJobs = async (adapter: typeof source, name: string, cached: boolean) => {
    const gitDir = await server.importRepository(sourceDir, name);
    const options = cached
      ? { cache: new adapter.RepoCache({ dir: join(root, `cache-${name}`), maxBytes: 2 ** 26 }) }
      : {};
    const one = await adapter.applyPatchCommit(job(server.repoUrl(name), 1, first, baseSha), options);
    const two = await adapter.applyPatchCommit(job(server.repoUrl(name), 2, second, one.commitSha), options);
    return { gitDir, shas: [one.commitSha, two.commitSha] };
  };

  const expected = await twoJobs(source, 'from-source', false);
  const cold = await twoJobs(bundled, 'bundled-cold', false);
  const warm = await twoJobs(bundled, 'bundled-warm', true);

  expect(cold.shas).toEqual(expected.shas);
  expect(warm.shas).toEqual(expected.shas);
  for (const { gitDir } of [cold, warm]) await git(gitDir, 'fsck', '--strict', '--no-progress');
  const tree = await git(warm.gitDir, 'rev-parse', `${warm.shas[0]}^{tree}`);
  expect(tree).toBe(await gitApplyTree(warm.gitDir, baseSha, first));
}, 120_000);

it('throws errors the pipeline classifies: a diff that does not apply fails PATCH_DOES_NOT_APPLY', async () => {
  const name = 'bundled-refused';
  await server.importRepository(sourceDir, name);
  const diff = await diffOfEdits(sourceDir, baseSha, (dir) => writeFiles(dir, { 'pkg1/file1.txt': 'edited\n' }));
  const stale = diff.replace(/^-file 1$/m, '-a line the file does not have');
  const refused = bundled.applyPatchCommit({
    repoUrl: server.repoUrl(name),
    branch: 'main',
    diff: stale,
    baseSha,
    jobId: 'job-refused',
    message: 'Refused',
    createdAt: '2026-03-01T12:00:00.000Z',
    workDir: root,
  });

  // The bundled file has its own copy of the error classes: instanceof must still hold across copies.
  await expect(refused).rejects.toBeInstanceOf(PermanentJobError);
  await expect(refused).rejects.toMatchObject({ reason: 'PATCH_DOES_NOT_APPLY' });
}, 60_000);
