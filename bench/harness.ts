/**
 * Benchmark plumbing: each bench file exports `bench: Benchmark`; `npm run bench` runs them one
 * after the other (never in parallel: 2 cores) and writes BENCHMARKS.md. Figures from these
 * machines are noisy, so every benchmark reports ratios next to absolute figures, and no test
 * asserts on time.
 */
import { cpus, loadavg, totalmem } from 'node:os';

export interface BenchRow {
  readonly label: string;
  readonly value: string;
}

export interface BenchReport {
  readonly title: string;
  /** What was measured and how to read it. */
  readonly description: string;
  readonly rows: readonly BenchRow[];
  /** Lines of the summary table at the top of BENCHMARKS.md: the headline figure against its goal. */
  readonly summary?: readonly SummaryRow[];
}

export interface SummaryRow {
  readonly measure: string;
  readonly value: string;
  readonly goal: string;
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

/** `npm run bench -- --quick` (BENCH_QUICK=1): fewer repetitions, for a first look; BENCHMARKS.md says so. */
export function quick(): boolean {
  return process.env['BENCH_QUICK'] === '1';
}

/** The 1-minute load average: on a 2-core machine shared with others, above ~2 means the figures are inflated. */
export function loadLine(): string {
  return loadavg()[0]?.toFixed(1) ?? 'n/a';
}

/** A benchmark's sentence on the load it ran under, from `loadLine()` taken at its start. */
export function loadDuring(loadBefore: string): string {
  return `1-minute load average ${loadBefore} at the start, ${loadLine()} at the end: above 2 (the cores), the wall times carry waiting for a core.`;
}

/** Runs `action` `times` times in a row and returns each duration in ms. */
export async function repeat(times: number, action: (run: number) => Promise<unknown>): Promise<number[]> {
  const durations: number[] = [];
  for (let run = 0; run < times; run++) {
    const started = performance.now();
    await action(run);
    durations.push(performance.now() - started);
  }
  return durations;
}

/** Value at quantile q (0..1) of a non-empty sample, nearest rank. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

/** Median of a non-empty sample. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export const fmt = {
  ms: (v: number) => `${v.toFixed(0)} ms`,
  /** Median, then the spread (min-max) and the sample size. */
  msSpread: (values: readonly number[]) =>
    `${median(values).toFixed(values.length && median(values) < 10 ? 1 : 0)} ms (${Math.min(...values).toFixed(0)}-${Math.max(...values).toFixed(0)}, n=${values.length})`,
  kib: (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`,
  mib: (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`,
  perSecond: (v: number) => `${v.toFixed(1)} /s`,
  ratio: (v: number) => `${v.toFixed(2)}x`,
};
