/**
 * `logs <jobId>`: what the platform logged about a job and, for a command stage (run_tests, ...),
 * the command's whole output. Locally both are read from the state directory; on AWS they live in
 * CloudWatch Logs and CodeBuild, so the command prints links to them.
 */
import { createReadStream, existsSync } from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import type { JobRecord } from '../../core/ports';
import { OUTPUT_KEEP_BYTES, PLATFORM_LOG_FILE, TEST_RUNS_DIR } from '../../local/state-dir';
import { buildLogUrl, jobFilterPattern, logEventsUrl } from '../../operator/aws-links';
import type { CommandOutput, CommandSpec } from '../command';
import type { CliContext } from '../context';
import { EXIT } from '../errors';
import type { Target } from '../../operator/targets';
import { statusLabel } from '../../operator/views';
import { requireJob } from './jobs';

// The test runner's module (and its schemas) loads only here, for the kept output (require: see targets.ts).
const loadTestRunner = (): typeof import('../../local/test-runner') => require('../../local/test-runner');

/**
 * Keys of a log line that are not shown: Powertools' fixed ones, the job id asked for, and the
 * ledger's working fields should a handler ever log them (`--json` never carries those).
 */
const HIDDEN_LOG_KEYS = new Set(['level', 'message', 'timestamp', 'function', 'service', 'sampling_rate', 'xray_trace_id', 'jobId', 'leaseOwner', 'leaseUntil', 'digest', 'ttl']);

/** One line of what `logs --json` prints. */
export type LogsLine =
  | { readonly kind: 'log'; readonly timestamp?: string; readonly level?: string; readonly function?: string; readonly message?: string; readonly fields: Record<string, unknown> }
  | { readonly kind: 'output'; readonly buildId: string; readonly run: number; readonly text: string }
  | { readonly kind: 'link'; readonly what: string; readonly url: string };

/** Lines of the platform log that name the job (JSON lines; anything else is skipped). */
async function platformLogLines(file: string, jobId: string): Promise<LogsLine[]> {
  if (!existsSync(file)) return [];
  const lines: LogsLine[] = [];
  for await (const line of createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity })) {
    if (!line.includes(jobId)) continue;
    const entry = parseObject(line);
    if (!entry || !namesJob(entry, jobId)) continue;
    const text = (key: string) => (typeof entry[key] === 'string' ? (entry[key] as string) : undefined);
    const fields = Object.fromEntries(Object.entries(entry).filter(([key]) => !HIDDEN_LOG_KEYS.has(key)));
    lines.push({ kind: 'log', timestamp: text('timestamp'), level: text('level'), function: text('function'), message: text('message'), fields });
  }
  return lines;
}

function namesJob(entry: Record<string, unknown>, jobId: string): boolean {
  return entry['jobId'] === jobId || (Array.isArray(entry['jobIds']) && entry['jobIds'].includes(jobId));
}

function parseObject(line: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The kept output of each run of a command stage (a redrive is a new run), oldest first. */
async function runOutputs(stateDir: string, job: JobRecord): Promise<LogsLine[]> {
  const { localBuildId, readRunOutput } = loadTestRunner();
  const outputs: LogsLine[] = [];
  for (let run = 0; run <= (job.run ?? 0); run++) {
    const buildId = localBuildId(job.jobId, run);
    const text = await readRunOutput(path.join(stateDir, TEST_RUNS_DIR), buildId);
    if (text !== undefined) outputs.push({ kind: 'output', buildId, run, text });
  }
  return outputs;
}

/** Links to the job's lines in each log group that can hold them, and to its build's log. */
export function awsLinks(target: Target, job: JobRecord): LogsLine[] {
  const buildId = job.progress?.['buildId'];
  // The sequencer takes every job; a staged job's own worker; a build's completion and reconciler.
  const workers = ['sequencer', job.type, ...(buildId ? ['build_events', 'build_reconciler'] : [])];
  const links: LogsLine[] = workers.flatMap((worker) => {
    const group = target.logGroups?.[worker];
    return group ? [{ kind: 'link' as const, what: `${worker} log lines of ${job.jobId}`, url: logEventsUrl(target.region, group, jobFilterPattern(job.jobId)) }] : [];
  });
  if (buildId) links.push({ kind: 'link', what: `build ${buildId} log (the whole test output)`, url: buildLogUrl(target.region, buildId) });
  return links;
}

function logsText(job: JobRecord, lines: readonly LogsLine[], source: string): string {
  const text = [`${job.jobId} (${job.type}, ${statusLabel(job)}): ${source}`];
  for (const line of lines) {
    if (line.kind === 'log') {
      const fields = Object.entries(line.fields).map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
      text.push([line.timestamp ?? '-', (line.level ?? '-').padEnd(5), line.function ?? '-', line.message ?? '', ...fields].join(' '));
    } else if (line.kind === 'output') {
      text.push('', `--- output of ${line.buildId} (run ${line.run}) ---`, line.text.replace(/\n$/, ''), `--- end of ${line.buildId} ---`);
    } else {
      text.push(`${line.what}:`, `  ${line.url}`);
    }
  }
  return text.join('\n');
}

export const logs: CommandSpec<CliContext> = {
  path: ['logs'],
  summary: "show a job's log lines and, for run_tests or another command stage, the command's whole output",
  positionals: [{ name: 'jobId', description: 'the job id' }],
  notes: [
    `Locally: the lines of the platform log (<state-dir>/${PLATFORM_LOG_FILE}) that name the job, then the output`,
    `of each run of a command stage (the last ${OUTPUT_KEEP_BYTES / 2 ** 20} MiB of it). On AWS: links to the job's lines in each`,
    "function's CloudWatch log group (filtered by the job id) and to its build's log in CodeBuild.",
    `Exit codes: 0 shown (also when nothing was logged yet); ${EXIT.notFound} the ledger does not know the job id.`,
  ],
  async run(ctx, { positionals }): Promise<CommandOutput> {
    const job = await requireJob(ctx, positionals[0] ?? '');
    const target = await ctx.target();
    if (!target.local) {
      const links = awsLinks(target, job);
      const source = links.length ? `on ${target.label}` : `${target.label} has no log group outputs: deploy this version of the stack for links`;
      return { data: links, text: logsText(job, links, source) };
    }
    const logFile = path.join(target.local.stateDir, PLATFORM_LOG_FILE);
    const lines = [...(await platformLogLines(logFile, job.jobId)), ...(await runOutputs(target.local.stateDir, job))];
    return { data: lines, text: logsText(job, lines, lines.length ? `from ${logFile}` : `nothing logged yet in ${logFile}`) };
  },
};
