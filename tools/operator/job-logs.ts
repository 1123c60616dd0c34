/**
 * A job's logs: what the platform logged about it and, for a command stage (run_tests, ...), the
 * command's whole output. Locally both are read from the state directory; on AWS they live in
 * CloudWatch Logs and CodeBuild, so they are links.
 */
import { createReadStream, existsSync } from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { COMMAND_JOB_TYPES, commandStageOf } from '../../contract/job-types';
import { TERMINAL_STATUSES, type JobRecord } from '../../src/core/ports';
import { OUTPUT_KEEP_BYTES, PLATFORM_LOG_FILE, TEST_RUNS_DIR } from '../local/state-dir';
import { buildLogUrl, jobFilterPattern, logEventsUrl } from './aws-links';
import { buildLogTail, type OutputTail } from './build-log';
import type { Connection } from './connection';
import { InvalidRequestError } from './errors';
import { requireJob } from './jobs';
import type { Target } from './targets';
import { aJobOfType } from './views';

export { OUTPUT_KEEP_BYTES };

// The test runner's module (and its schemas) loads only here, for the kept output (require: see targets.ts).
const loadTestRunner = (): typeof import('../local/test-runner') => require('../local/test-runner');

/**
 * Keys of a log line that are not shown: Powertools' fixed ones, the job id asked for, and the
 * ledger's working fields should a handler ever log them (`--json` never carries those).
 */
const HIDDEN_LOG_KEYS = new Set([
  'level',
  'message',
  'timestamp',
  'function',
  'service',
  'sampling_rate',
  'xray_trace_id',
  'jobId',
  'leaseOwner',
  'leaseUntil',
  'digest',
  'ttl',
]);

/** One line of what `logs --json` prints. */
export type LogsLine =
  | {
      readonly kind: 'log';
      readonly timestamp?: string;
      readonly level?: string;
      readonly function?: string;
      readonly message?: string;
      readonly fields: Record<string, unknown>;
    }
  /** `running`: the run is still printing; `text` is its output so far (its last RUNNING_OUTPUT_BYTES). */
  | {
      readonly kind: 'output';
      readonly buildId: string;
      readonly run: number;
      readonly text: string;
      readonly running?: true;
    }
  | { readonly kind: 'link'; readonly what: string; readonly url: string };

/** Lines of the platform log that name the job (JSON lines; anything else is skipped). */
async function platformLogLines(file: string, jobId: string): Promise<LogsLine[]> {
  if (!existsSync(file)) return [];
  const lines: LogsLine[] = [];
  for await (const line of createInterface({
    input: createReadStream(file, { encoding: 'utf8' }),
    crlfDelay: Infinity,
  })) {
    if (!line.includes(jobId)) continue;
    const entry = parseObject(line);
    if (!entry || !namesJob(entry, jobId)) continue;
    const text = (key: string) => (typeof entry[key] === 'string' ? (entry[key] as string) : undefined);
    const fields = Object.fromEntries(Object.entries(entry).filter(([key]) => !HIDDEN_LOG_KEYS.has(key)));
    lines.push({
      kind: 'log',
      timestamp: text('timestamp'),
      level: text('level'),
      function: text('function'),
      message: text('message'),
      fields,
    });
  }
  return lines;
}

function namesJob(entry: Record<string, unknown>, jobId: string): boolean {
  return entry['jobId'] === jobId || (Array.isArray(entry['jobIds']) && entry['jobIds'].includes(jobId));
}

function parseObject(line: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The kept output of each run of a command stage (a redrive is a new run), oldest first: runs
 * that started after the job was created, so an earlier job's under the same id is never shown.
 */
async function runOutputs(stateDir: string, job: JobRecord): Promise<LogsLine[]> {
  const { buildsOfJob, readRunOutput, readRunningOutput } = loadTestRunner();
  const runsDir = path.join(stateDir, TEST_RUNS_DIR);
  const outputs: LogsLine[] = [];
  for (const { buildId, run } of await buildsOfJob(runsDir, job.jobId, Date.parse(job.createdAt))) {
    const text = await readRunOutput(runsDir, buildId);
    if (text !== undefined) {
      outputs.push({ kind: 'output', buildId, run, text });
      continue;
    }
    // Not kept yet: the run is printing. Its output so far, so every surface shows it while it runs.
    const soFar = await readRunningOutput(runsDir, buildId, RUNNING_OUTPUT_BYTES);
    if (soFar !== undefined) outputs.push({ kind: 'output', buildId, run, text: soFar, running: true });
  }
  return outputs;
}

/** Bytes of a running run's output read for a view of it (its end): a page or a tail, never the whole. */
export const RUNNING_OUTPUT_BYTES = 64 * 1024;

/** Links to the job's lines in each log group that can hold them, and to its build's log. */
export function awsLinks(target: Target, job: JobRecord): LogsLine[] {
  const buildId = job.progress?.['buildId'];
  // The sequencer takes every job; a staged job's own worker; a build's completion and reconciler.
  const workers = ['sequencer', job.type, ...(buildId ? ['build_events', 'build_reconciler'] : [])];
  const links: LogsLine[] = workers.flatMap((worker) => {
    const group = target.logGroups?.[worker];
    return group
      ? [
          {
            kind: 'link' as const,
            what: `${worker} log lines of ${job.jobId}`,
            url: logEventsUrl(target.region, group, jobFilterPattern(job.jobId)),
          },
        ]
      : [];
  });
  const build = buildLogLink(target, job);
  return build ? [...links, build] : links;
}

/** The link to the log of the job's build (CodeBuild keeps a command's whole output), once it has one. */
function buildLogLink(target: Target, job: JobRecord): LogsLine | undefined {
  const buildId = job.progress?.['buildId'];
  return buildId
    ? { kind: 'link', what: `build ${buildId} log (the whole test output)`, url: buildLogUrl(target.region, buildId) }
    : undefined;
}

export interface JobLogs {
  readonly lines: readonly LogsLine[];
  /** Where they come from, in words: the log file, or the stack (or why there are no links). */
  readonly source: string;
}

/**
 * A command stage's output alone: each run's kept output, oldest first (local platform), or the
 * link to its build's log (deployed stack: CodeBuild keeps it).
 */
export async function readRunOutputs(target: Target, job: JobRecord): Promise<LogsLine[]> {
  if (target.local) return runOutputs(target.local.stateDir, job);
  const build = buildLogLink(target, job);
  return build ? [build] : [];
}

/** The job's log lines and outputs (local platform), or the links to them (deployed stack). */
export async function readJobLogs(target: Target, job: JobRecord): Promise<JobLogs> {
  if (!target.local) {
    const links = awsLinks(target, job);
    return {
      lines: links,
      source: links.length
        ? `on ${target.label}`
        : `${target.label} has no log group outputs: deploy this version of the stack for links`,
    };
  }
  const logFile = path.join(target.local.stateDir, PLATFORM_LOG_FILE);
  const lines = [...(await platformLogLines(logFile, job.jobId)), ...(await runOutputs(target.local.stateDir, job))];
  return { lines, source: lines.length ? `from ${logFile}` : `nothing logged yet in ${logFile}` };
}

export interface FollowOptions {
  /** Called with each piece of output as it is read, in order; `last`: read once the job had finished (nothing follows). */
  readonly onOutput: (text: string, last: boolean) => void | Promise<void>;
  /** Stops following early (Ctrl-C, a cancelled request): the job as last read is returned. */
  readonly signal?: AbortSignal;
  /** @default FOLLOW_POLL_MS */
  readonly pollMs?: number;
}

/** How often a followed run's output and its job are read again. */
export const FOLLOW_POLL_MS = 250;

/**
 * Follows a command stage's output as it is printed: what its run printed so far, then each new
 * piece, until the job has finished and its output is read to its end. Locally from the runs
 * directory; on a stack from the build's CloudWatch Logs stream. A redrive's new run is followed
 * from its start. Memory stays bounded: a piece at a time.
 */
export async function followRunOutput(
  connection: Connection,
  jobId: string,
  options: FollowOptions,
): Promise<JobRecord> {
  const target = await connection.target();
  const tailOf = target.local
    ? localTail(path.join(target.local.stateDir, TEST_RUNS_DIR))
    : (buildId: string) => stackTail(connection, buildId);
  let buildId: string | undefined;
  let tail: OutputTail | undefined;
  for (;;) {
    const job = await requireJob(connection, jobId);
    if (!commandStageOf(job.type))
      throw new InvalidRequestError(
        `${jobId} is ${aJobOfType(job.type)}: only command stages (${COMMAND_JOB_TYPES.join(', ')}) print output`,
      );
    const current = runBuildOf(job);
    if (current !== buildId) [buildId, tail] = [current, current === undefined ? undefined : tailOf(current)];
    const last = TERMINAL_STATUSES.includes(job.status);
    // Read to what is there now: the verdict is written after the output is kept, so a finished job's is whole.
    for (let piece = await tail?.next(); piece !== undefined; piece = await tail?.next())
      await options.onOutput(piece, last);
    if (last || options.signal?.aborted) return job;
    await sleep(options.pollMs ?? FOLLOW_POLL_MS, undefined, { signal: options.signal }).catch(() => undefined);
  }
}

/** A local run's output file, read on from the last offset; a cut the runner made is named in the text. */
function localTail(runsDir: string): (buildId: string) => OutputTail {
  const { readRunOutputFrom } = loadTestRunner();
  return (buildId) => {
    let offset = 0;
    return {
      async next() {
        const piece = await readRunOutputFrom(runsDir, buildId, offset);
        if (!piece || (!piece.text && !piece.skipped)) return undefined;
        offset = piece.nextOffset + piece.skipped;
        return `${piece.skipped ? `[${piece.skipped} bytes of the output before this were not kept]\n` : ''}${piece.text}`;
      },
    };
  };
}

/** A stack's build log, with the connection's clients, made on the first read. */
function stackTail(connection: Connection, buildId: string): OutputTail {
  let tail: OutputTail | undefined;
  return { next: async () => (tail ??= buildLogTail(await connection.clients(), buildId)).next() };
}

/** The build of the job's current run: recorded while it runs, in the result once it has a verdict. */
function runBuildOf(job: JobRecord): string | undefined {
  const recorded = job.progress?.['buildId'] ?? job.result?.['buildId'];
  return typeof recorded === 'string' ? recorded : undefined;
}
