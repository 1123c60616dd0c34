/**
 * `npm run bench [-- [--quick] name...]`: runs the benchmarks (all, or those named) one after the
 * other, prints each report and writes BENCHMARKS.md: a summary of the headline figures against
 * their goals, then every section. `--quick` runs fewer repetitions (the file says so). A run of
 * some benchmarks replaces only their sections and keeps the others' (each names its command).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadLine, machineLine, toMarkdown, type Benchmark, type SummaryRow } from './harness';
import { bench as bundles } from './bundles.bench';
import { bench as applyPatch } from './apply-patch.bench';
import { bench as applyPatchNetwork } from './apply-patch-network.bench';
import { bench as orderedLane } from './ordered-lane.bench';
import { bench as fifoBatch } from './fifo-batch.bench';
import { bench as ledger } from './ledger.bench';
import { bench as lambdaCost } from './lambda-cost.bench';
import { bench as fairStages } from './fair-stages.bench';
import { bench as cliLatency } from './cli-latency.bench';
import { bench as consoleBench } from './console.bench';
import { bench as mcp } from './mcp.bench';
import { bench as sandbox } from './sandbox.bench';
import { bench as quotas } from './quotas.bench';

const ALL: readonly Benchmark[] = [
  bundles,
  applyPatch,
  applyPatchNetwork,
  orderedLane,
  fifoBatch,
  ledger,
  lambdaCost,
  cliLatency,
  fairStages,
  consoleBench,
  mcp,
  sandbox,
  quotas,
];

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.includes('--quick')) process.env['BENCH_QUICK'] = '1';
  const wanted = args.filter((a) => a !== '--quick');
  const selected = wanted.length ? ALL.filter((b) => wanted.includes(b.name)) : ALL;
  if (selected.length !== wanted.length && wanted.length)
    throw new Error(`unknown benchmark in ${wanted.join(', ')}; have: ${ALL.map((b) => b.name).join(', ')}`);
  const started = Date.now();
  const loadBefore = loadLine();
  const file = join(__dirname, '..', 'BENCHMARKS.md');
  const sections = wanted.length ? await sectionsOf(file) : new Map<string, string>();
  // A run of some benchmarks keeps the others' summary rows, as it keeps their sections.
  const summaries = new Map<string, readonly SummaryRow[]>(
    wanted.length ? summaryRowsOf(sections.get('Summary') ?? '') : [],
  );
  sections.delete('Summary');
  for (const benchmark of selected) {
    process.stderr.write(`running ${benchmark.name}...\n`);
    const report = await benchmark.run();
    const markdown = toMarkdown(report);
    process.stdout.write(`${markdown}\n`);
    sections.set(report.title, markdown);
    summaries.set(benchmark.name, report.summary ?? []);
  }
  const summary = ALL.flatMap((b) => (summaries.get(b.name) ?? []).map((row) => ({ ...row, from: b.name })));
  const command = `npm run bench${args.length ? ` -- ${args.join(' ')}` : ''}`;
  const header = [
    '# Benchmarks',
    '',
    `Written by \`${command}\` on ${new Date().toISOString().slice(0, 10)} in ${((Date.now() - started) / 60_000).toFixed(1)} minutes${wanted.length ? ' (the other sections are from earlier runs)' : ''}`,
    `(${machineLine()}; 1-minute load average ${loadBefore} at the start, ${loadLine()} at the end${args.includes('--quick') ? '; quick mode: fewer repetitions' : ''}).`,
    "Everything runs against the local emulators (fauxqs, dynalite; the ledger section also on AWS's",
    'DynamoDB Local) and a loopback git server, so the figures describe this code on this machine, not',
    'AWS latency or limits. Timings here are noisy (a load average above the number of cores means other',
    'work shared them): read the ratios first.',
    '',
    ...(summary.length
      ? [
          '## Summary',
          '',
          '| measure | this run | goal | benchmark |',
          '| --- | --- | --- | --- |',
          ...summary.map((s) => `| ${s.measure} | ${s.value} | ${s.goal} | ${s.from} |`),
          '',
        ]
      : []),
  ];
  await writeFile(file, [...header, ...sections.values()].join('\n'));
}

/** The summary rows of an existing Summary section, by the benchmark named in their last column. */
function summaryRowsOf(section: string): [string, SummaryRow[]][] {
  const byBenchmark = new Map<string, SummaryRow[]>();
  for (const line of section.split('\n')) {
    const cells = /^\| (.*) \|$/.exec(line)?.[1]?.split(' | ');
    if (cells?.length !== 4) continue;
    const [measure, value, goal, from] = cells as [string, string, string, string];
    if (!ALL.some((b) => b.name === from)) continue; // the header row, or a benchmark that is gone
    byBenchmark.set(from, [...(byBenchmark.get(from) ?? []), { measure, value, goal }]);
  }
  return [...byBenchmark];
}

/** The `## title` sections of an existing BENCHMARKS.md, in order (none when there is no file). */
async function sectionsOf(file: string): Promise<Map<string, string>> {
  const text = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return '';
    throw error;
  });
  const parts = text.split(/^(?=## )/m).filter((part) => part.startsWith('## '));
  // Each ends with one newline, as toMarkdown writes it: sections are joined with one blank line.
  return new Map(parts.map((part) => [part.slice(3, part.indexOf('\n')), part.replace(/\n+$/, '\n')]));
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
