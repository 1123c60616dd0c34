/**
 * Each function's bundle: its bytes, the SDK clients it requires, the largest packages in it, and
 * how long node takes to load it (the cold start's module work, before the first event).
 *
 * Bundled with esbuild as the stack bundles it (lib/constructs/worker.ts: minified, for the
 * Lambda's Node.js major, the AWS SDK and Smithy left to the runtime); the synth test
 * (test/infra/bundling.test.ts) holds each bundle to the budget its catalog entry declares.
 * A load is `require(bundle)` in a fresh node process, timed inside it, with the SDK packages
 * resolved from this project's node_modules (the runtime's own stand in for them on Lambda).
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build, type Metafile } from 'esbuild';
import { allWorkers } from '../contract/job-types';
import { LAMBDA_NODE_MAJOR, stackEsbuildOptions } from '../lib/constructs/worker';
import { fmt, median, quick, type Benchmark, type BenchRow } from './harness';

const ROOT = join(__dirname, '..');

/** Bytes of the bundle's output by package (or `src`, `contract` for our own code), largest first. */
function byPackage(metafile: Metafile, outfile: string): [string, number][] {
  const output = Object.entries(metafile.outputs).find(([path]) => path.endsWith(outfile))?.[1];
  const sizes = new Map<string, number>();
  for (const [input, { bytesInOutput }] of Object.entries(output?.inputs ?? {})) {
    const name = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input)?.[1] ?? input.split('/')[0] ?? input;
    sizes.set(name, (sizes.get(name) ?? 0) + bytesInOutput);
  }
  return [...sizes].sort((a, b) => b[1] - a[1]);
}

/** Milliseconds node takes to require `file`, measured in a fresh process. */
function loadMs(file: string): number {
  const script = `const t = performance.now(); require(${JSON.stringify(file)}); process.stdout.write(String(performance.now() - t));`;
  const result = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, NODE_PATH: join(ROOT, 'node_modules') } });
  if (result.status !== 0) throw new Error(`loading ${file} failed: ${result.stderr}`);
  return Number(result.stdout);
}

export const bench: Benchmark = {
  name: 'bundles',
  async run() {
    const loads = quick() ? 3 : 10;
    const out = await mkdtemp(join(tmpdir(), 'bench-bundles-'));
    const rows: BenchRow[] = [];
    const figures: { name: string; kib: number; budget: number; loadMs: number }[] = [];
    try {
      for (const { name, settings } of allWorkers()) {
        const outfile = join(out, name, 'index.js');
        const { metafile } = await build({
          entryPoints: [join(ROOT, settings.handlerEntry)],
          outfile,
          ...stackEsbuildOptions(ROOT),
          metafile: true,
        });
        const bytes = (await stat(outfile)).size;
        const code = await readFile(outfile, 'utf8');
        const clients = [...new Set([...code.matchAll(/require\("@aws-sdk\/([^"]+)"\)/g)].map((m) => m[1]))].sort();
        const top = byPackage(metafile, join(name, 'index.js'))
          .slice(0, 5)
          .map(([pkg, size]) => `${pkg} ${fmt.kib(size)}`)
          .join(', ');
        const ms = Array.from({ length: loads }, () => loadMs(outfile));
        figures.push({ name, kib: bytes / 1024, budget: settings.bundleBudgetKiB, loadMs: median(ms) });
        rows.push(
          { label: `${name}: bundle`, value: `${fmt.kib(bytes)} (budget ${settings.bundleBudgetKiB} KiB); largest: ${top}` },
          { label: `${name}: cold module load, SDK included`, value: `${fmt.msSpread(ms)}; requires ${clients.join(', ')}` },
        );
      }
    } finally {
      await rm(out, { recursive: true, force: true });
    }
    return {
      title: 'Function bundles: bytes and cold module load',
      description: [
        `esbuild as the stack bundles (minified, node${LAMBDA_NODE_MAJOR} target, AWS SDK and Smithy external); the synth test enforces the budgets.`,
        `Cold module load: \`require\` of the bundle in a fresh node (${process.version} here, not the Lambda runtime), median (min-max) of ${loads}.`,
        '',
        'Command: `npm run bench bundles`',
      ].join('\n'),
      rows,
      summary: [
        { measure: `bundle, ${figures.map((f) => f.name).join(' / ')}`, value: `${figures.map((f) => f.kib.toFixed(0)).join(' / ')} KiB`, goal: `sequencer <= 250, run_tests <= 120, open_pr <= 200 KiB (budgets ${figures.map((f) => f.budget).join(' / ')})` },
        { measure: 'cold module load of a bundle, SDK loaded', value: `${figures.map((f) => f.loadMs.toFixed(0)).join(' / ')} ms`, goal: '<= 40 ms each' },
      ],
    };
  },
};
