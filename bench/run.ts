/**
 * `npm run bench [name...]`: runs the benchmarks (all, or those named) sequentially, prints each
 * report and writes BENCHMARKS.md. A run of some benchmarks replaces only their sections and keeps
 * the others' (each section names the command that produced it).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { machineLine, toMarkdown, type Benchmark } from './harness';
import { bench as applyPatch } from './apply-patch.bench';
import { bench as orderedLane } from './ordered-lane.bench';
import { bench as ledger } from './ledger.bench';
import { bench as lambdaCost } from './lambda-cost.bench';

const ALL: readonly Benchmark[] = [applyPatch, orderedLane, ledger, lambdaCost];

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  const selected = wanted.length ? ALL.filter((b) => wanted.includes(b.name)) : ALL;
  if (selected.length === 0) throw new Error(`no benchmark named ${wanted.join(', ')}; have: ${ALL.map((b) => b.name).join(', ')}`);
  const file = join(__dirname, '..', 'BENCHMARKS.md');
  const sections = wanted.length ? await sectionsOf(file) : new Map<string, string>();
  for (const benchmark of selected) {
    process.stderr.write(`running ${benchmark.name}...\n`);
    const report = await benchmark.run();
    const markdown = toMarkdown(report);
    process.stdout.write(`${markdown}\n`);
    sections.set(report.title, markdown);
  }
  const header = [
    '# Benchmarks',
    '',
    `Written by \`npm run bench\`; last run on ${new Date().toISOString().slice(0, 10)} (${machineLine()})${wanted.length ? `: ${selected.map((b) => b.name).join(', ')} (the other sections are from earlier runs)` : ''}.`,
    'Everything runs against the local emulators (fauxqs, dynalite) and a loopback git server, so the',
    'figures describe this code on this machine, not AWS latency or limits. Timings here are noisy:',
    'read the ratios first.',
    '',
  ];
  await writeFile(file, [...header, ...sections.values()].join('\n'));
}

/** The `## title` sections of an existing BENCHMARKS.md, in order (none when there is no file). */
async function sectionsOf(file: string): Promise<Map<string, string>> {
  const text = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return '';
    throw error;
  });
  const parts = text.split(/^(?=## )/m).filter((part) => part.startsWith('## '));
  return new Map(parts.map((part) => [part.slice(3, part.indexOf('\n')), part]));
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
