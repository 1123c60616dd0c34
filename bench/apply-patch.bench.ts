/**
 * apply_patch on a generated repository of a few thousand files: the adapter (shallow fetch, tree
 * edits without a checkout, fast-forward push) against the git CLI doing the same job with a
 * checkout (shallow clone, `git apply --index`, commit, push), and the redelivery path (the trailer
 * is found, nothing is pushed). Run alone with `npx tsx bench/apply-patch.bench.ts`.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { applyPatchCommit } from '../src/adapters/git';
import { startGitServer } from '../src/local/git-server';
import { createRepo, diffOfEdits, git, removeDir, tempDir, writeFiles } from '../test/support/git-fixtures';
import { fmt, median, toMarkdown, type Benchmark } from './harness';

const DIRS = 100;
const FILES_PER_DIR = 30;
const RUNS = 3;

function generatedFiles(): Record<string, string> {
  const files: Record<string, string> = {};
  for (let d = 0; d < DIRS; d++) {
    for (let f = 0; f < FILES_PER_DIR; f++) {
      files[`pkg${d}/src/file${f}.ts`] = Array.from({ length: 40 }, (_, i) => `export const value${i} = ${d * 1000 + f * 40 + i};\n`).join('');
    }
  }
  return files;
}

/** 20 edits spread over the tree, 5 new files, 5 deletions, 2 renames with an edit. */
async function agentEdits(dir: string): Promise<void> {
  const edits: Record<string, string> = {};
  for (let i = 0; i < 20; i++) {
    const d = (i * 7) % DIRS;
    edits[`pkg${d}/src/file${i}.ts`] = Array.from({ length: 40 }, (_, l) => `export const value${l} = ${l === 20 ? 'edited' : d * 1000 + i * 40 + l};\n`).join('');
  }
  for (let i = 0; i < 5; i++) edits[`pkg${i}/src/added${i}.ts`] = `export const added = ${i};\n`;
  await writeFiles(dir, edits);
  for (let i = 0; i < 5; i++) await git(dir, 'rm', '--quiet', `pkg${50 + i}/src/file0.ts`);
  for (let i = 0; i < 2; i++) {
    await rename(join(dir, `pkg${60 + i}/src/file1.ts`), join(dir, `pkg${60 + i}/src/renamed.ts`));
    await writeFiles(dir, { [`pkg${60 + i}/src/renamed.ts`]: Array.from({ length: 40 }, (_, l) => `export const value${l} = ${l === 5 ? 'renamed' : (60 + i) * 1000 + 40 + l};\n`).join('') });
  }
}

async function timedMs(action: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await action();
  return performance.now() - started;
}

export const bench: Benchmark = {
  name: 'apply-patch',
  async run() {
    const root = await tempDir('bench-apply');
    const server = await startGitServer({ root: join(root, 'repos') });
    try {
      const source = join(root, 'source');
      await mkdir(source);
      const baseSha = await createRepo(source, generatedFiles());
      const diff = await diffOfEdits(source, baseSha, agentEdits);
      const job = (url: string) => ({
        repoUrl: url,
        branch: 'main',
        diff,
        baseSha,
        jobId: 'bench-job',
        message: 'bench',
        createdAt: '2026-03-01T12:00:00Z',
        workDir: root,
      });

      const adapter: number[] = [];
      const redelivery: number[] = [];
      const cli: number[] = [];
      for (let run = 0; run < RUNS; run++) {
        const name = `ws-${randomUUID()}`;
        await server.importRepository(source, name);
        adapter.push(await timedMs(() => applyPatchCommit(job(server.repoUrl(name)))));
        redelivery.push(await timedMs(() => applyPatchCommit(job(server.repoUrl(name)))));

        const cliName = `cli-${randomUUID()}`;
        await server.importRepository(source, cliName);
        const work = join(root, cliName);
        const patchFile = `${work}.diff`;
        await writeFiles(root, { [`${cliName}.diff`]: diff });
        cli.push(
          await timedMs(async () => {
            await git(root, 'clone', '--quiet', '--depth', '10', '--branch', 'main', server.repoUrl(cliName), work);
            await git(work, 'apply', '--index', patchFile);
            await git(work, 'commit', '--quiet', '--message', 'bench');
            await git(work, 'push', '--quiet', 'origin', 'main');
          }),
        );
        await removeDir(work);
      }
      return {
        title: 'apply_patch on a generated repository',
        description: [
          `${DIRS * FILES_PER_DIR} files in ${DIRS} directories; the diff edits 20 files, adds 5, deletes 5 and renames 2 with an edit`,
          `(${Buffer.byteLength(diff)} bytes). Median of ${RUNS} runs, each on a fresh copy of the remote, over the loopback git server.`,
          'The git CLI row does the same job with a checkout: shallow clone, `git apply --index`, commit, push.',
        ].join(' '),
        rows: [
          { label: 'applyPatchCommit (fetch, tree edits, push)', value: fmt.ms(median(adapter)) },
          { label: 'redelivery (trailer found, nothing pushed)', value: fmt.ms(median(redelivery)) },
          { label: 'git CLI with a checkout', value: fmt.ms(median(cli)) },
          { label: 'adapter / git CLI', value: fmt.ratio(median(adapter) / median(cli)) },
        ],
      };
    } finally {
      await server.close();
      await removeDir(root);
    }
  },
};

if (require.main === module) {
  bench
    .run()
    .then((report) => process.stdout.write(`${toMarkdown(report)}\n`))
    .catch((error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    });
}
