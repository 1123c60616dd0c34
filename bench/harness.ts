/**
 * Benchmark plumbing: each bench file exports `bench: Benchmark`; `npm run bench` runs them one
 * after the other (never in parallel: 2 cores) and writes BENCHMARKS.md. Figures from these
 * machines are noisy, so every benchmark reports ratios next to absolute figures, and no test
 * asserts on time.
 */
import { cpus, totalmem } from 'node:os';

export interface BenchRow {
  readonly label: string;
  readonly value: string;
}

export interface BenchReport {
  readonly title: string;
  /** What was measured and how to read it. */
  readonly description: string;
  readonly rows: readonly BenchRow[];
}

export interface Benchmark {
  readonly name: string;
  run(): Promise<BenchReport>;
}

export function machineLine(): string {
  const cpu = cpus();
  return `Node ${process.version}, ${cpu.length} x ${cpu[0]?.model ?? 'unknown CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB`;
}

export function toMarkdown(report: BenchReport): string {
  return [
    `## ${report.title}`,
    '',
    report.description,
    '',
    '| measure | value |',
    '| --- | --- |',
    ...report.rows.map((r) => `| ${r.label} | ${r.value} |`),
    '',
  ].join('\n');
}

/** Median of a non-empty sample. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export const fmt = {
  ms: (v: number) => `${v.toFixed(0)} ms`,
  perSecond: (v: number) => `${v.toFixed(1)} /s`,
  ratio: (v: number) => `${v.toFixed(2)}x`,
};
