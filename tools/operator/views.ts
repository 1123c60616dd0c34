/**
 * What people are shown of ledger records, on every surface (the CLI, its `--json`, the live view,
 * the console): the public views and one-line summaries. The public views are allow-lists: the
 * ledger's working fields (lease owner and deadline, request digest, TTL, index keys) never reach
 * the output, whatever is added to the records later.
 */
import { commandStageOf, verdictWording, type CommandJobType } from '../../contract/job-types';
import { conflictQueueOf } from '../../src/core/ledger';
import { parseStageMessageOf, type Pin } from '../../src/core/envelope';
import { commandOf } from '../../src/core/jobs/command-stage';
import { requiredTypes } from '../../src/core/requirements';
import type { GateCheck } from '../../src/core/errors';
import {
  SKIPPED_REASON,
  TERMINAL_STATUSES,
  type ConflictAttempt,
  type JobDismissal,
  type JobFailure,
  type JobRecord,
  type JobStatus,
  type WorkspaceRecord,
} from '../../src/core/ports';

const SUMMARY_CHARS = 100;

/**
 * "an apply_patch job", "a run_tests job": a job type's name with the article its first sound takes
 * (read as a word: a vowel takes "an"), for any type a catalog declares.
 */
export function aJobOfType(type: string): string {
  return `${/^[aeiou]/i.test(type) ? 'an' : 'a'} ${type} job`;
}

/** First 12 characters of a commit sha, like git's short form. */
export function shortSha(sha: string | undefined): string | undefined {
  return sha?.slice(0, 12);
}

/**
 * A job's turn in its workspace, `4 (earlier: 2)` for one run again after a skip or a failure: the
 * sequencer counts turns (a skip takes one, a replay another), so every number up to the workspace's
 * count names a job. Undefined before its first turn.
 */
export function seqWords(job: Pick<JobRecord, 'wsSeq' | 'earlierSeqs'>): string | undefined {
  if (job.wsSeq === undefined) return undefined;
  return `${job.wsSeq}${job.earlierSeqs?.length ? ` (earlier: ${job.earlierSeqs.join(', ')})` : ''}`;
}

/** A job as `--json` prints it. */
export interface PublicJob {
  readonly jobId: string;
  readonly workspaceId: string;
  readonly tenantId: string;
  readonly type: string;
  readonly status: JobStatus;
  /** How many times its worker started it (see JobRecord.attempt). */
  readonly attempt: number;
  /** Place in the workspace's order (its turn), once the sequencer took it. */
  readonly seq?: number;
  /** The turns it had before `seq`: skipped or failed there, then run again. */
  readonly earlierSeqs?: readonly number[];
  readonly pin?: Pin;
  readonly blockedBy?: string;
  readonly result?: Record<string, unknown>;
  readonly error?: JobFailure;
  /** run_tests: the test build (CodeBuild build id on AWS, `local-<jobId>` locally). */
  readonly buildId?: string;
  /** A command stage's command, once its stage took the job (jobCommand). */
  readonly command?: string;
  /** true: the job named no command, and `command` is its stage's default. */
  readonly commandIsDefault?: boolean;
  readonly createdAt: string;
  /** When its current attempt started (its worker's claim). */
  readonly startedAt?: string;
  readonly updatedAt: string;
  /** A failure an operator recorded as dealt with: who, why, when. */
  readonly dismissed?: JobDismissal;
  /** A stage's gate (catalog `requires`): what it decided or waits for, in words (jobGate). */
  readonly gate?: string;
  /** Requests refused because they reused this job id (the job itself is unchanged by them). */
  readonly conflicts?: readonly PublicConflict[];
}

export interface PublicConflict {
  readonly at: string;
  readonly workspaceId: string;
  readonly tenantId: string;
  readonly type: string;
  /** Where it was refused: `enqueue` (never sent), `sequencer` or `stage` (then on that queue's DLQ). */
  readonly refusedBy: string;
  readonly dlq?: string;
}

export function publicJob(job: JobRecord, conflicts: readonly ConflictAttempt[] = []): PublicJob {
  const command = jobCommand(job);
  return {
    jobId: job.jobId,
    workspaceId: job.workspaceId,
    tenantId: job.tenantId,
    type: job.type,
    status: job.status,
    attempt: job.attempt,
    seq: job.wsSeq,
    earlierSeqs: job.earlierSeqs,
    pin: job.pin,
    blockedBy: job.blockedBy,
    result: job.result,
    error: job.error,
    buildId: job.progress?.['buildId'],
    command: command?.command,
    commandIsDefault: command?.isDefault || undefined,
    createdAt: job.createdAt,
    startedAt: job.startedAt,
    updatedAt: job.updatedAt,
    dismissed: job.dismissed,
    gate: jobGate(job)?.words,
    conflicts: conflicts.length ? conflicts.map(publicConflict) : undefined,
  };
}

export function publicConflict(attempt: ConflictAttempt): PublicConflict {
  return {
    at: attempt.at,
    workspaceId: attempt.workspaceId,
    tenantId: attempt.tenantId,
    type: attempt.type,
    refusedBy: attempt.seenBy,
    dlq: conflictQueueOf(attempt.type, attempt.seenBy),
  };
}

/** A workspace as `--json` prints it. */
export function publicWorkspace(ws: WorkspaceRecord): WorkspaceRecord {
  return {
    workspaceId: ws.workspaceId,
    repo: ws.repo,
    head: ws.head,
    state: ws.state,
    blockedBy: ws.blockedBy,
    blockedReason: ws.blockedReason,
    currentJobId: ws.currentJobId,
    currentDone: ws.currentDone,
    seq: ws.seq,
    updatedAt: ws.updatedAt,
  };
}

/** A command stage's verdict in its stage's words ("tests passed", "lint failed"): as recorded, or from the catalog. */
function verdictWords(job: Pick<JobRecord, 'type' | 'result'>): string | undefined {
  const { verdict, summary } = job.result ?? {};
  if (typeof summary === 'string') return summary;
  return typeof verdict === 'string' ? verdictWording(job.type, verdict) : undefined;
}

/**
 * A command stage's finished run is shown as its verdict ("tests failed", "lint passed"): what the
 * user asked. The job's status, SUCCEEDED (it ran to a verdict), is in `--json`.
 */
export function statusLabel(job: Pick<JobRecord, 'status' | 'result' | 'type'>): string {
  const words = verdictWords(job);
  return job.status === 'SUCCEEDED' && words !== undefined ? words : job.status;
}

/**
 * What a CANCELLED job was doing when it was cancelled, in the past tense, or undefined: it keeps
 * the record of its skip, or of the build the cancel stopped; a cancelled job is not shown as still
 * skipped or running.
 */
export function cancelledAfter(
  job: Pick<JobRecord, 'status' | 'error' | 'blockedBy' | 'progress'>,
): string | undefined {
  if (job.status !== 'CANCELLED') return undefined;
  const buildId = job.progress?.['buildId'];
  if (buildId !== undefined) return `running: build ${buildId}, stopped by the cancel`;
  if (!job.error) return undefined;
  if (job.error.reason === SKIPPED_REASON)
    return `skipped: ${job.error.message.replace(' is blocked by ', ' was blocked by ')}`;
  return `${job.error.reason}: ${job.error.message}`;
}

export interface JobCommand {
  readonly command: string;
  /** The job named none: this is its stage's default. */
  readonly isDefault: boolean;
}

/**
 * The command a command stage's job runs, read from the stage message the ledger keeps from the
 * stage's start of the build (the ledger keeps no payload before: it travels on the queue), by
 * the rule the stage ran it by (commandOf). Undefined before, and for any other job type.
 */
export function jobCommand(job: Pick<JobRecord, 'type' | 'stageMessage'>): JobCommand | undefined {
  if (job.stageMessage === undefined || commandStageOf(job.type) === undefined) return undefined;
  try {
    const message = parseStageMessageOf(job.type as CommandJobType, job.stageMessage);
    return { command: commandOf(message), isDefault: message.payload.command === undefined };
  } catch {
    return undefined; // not a stage message this version can read: no command to show
  }
}

/** A command as `status` and the job's page show it: the default named as such. */
export function commandWords({ command, isDefault }: JobCommand): string {
  return `${command}${isDefault ? DEFAULT_COMMAND_NOTE : ''}`;
}

export const DEFAULT_COMMAND_NOTE = " (the stage's default: the job named none)";

/** `by alice at <time>: <reason>`: a dismissal as `status` and the job's page show it. */
export function dismissedBy(dismissal: JobDismissal): string {
  return `by ${dismissal.by} at ${dismissal.at}: ${dismissal.reason}`;
}

/** SUCCEEDED, and for a test run also green: "did the work succeed", not "did it run". */
export function jobSucceeded(job: Pick<JobRecord, 'status' | 'result'>): boolean {
  return job.status === 'SUCCEEDED' && job.result?.['verdict'] !== 'failed';
}

/** A stage's gate as people read it (catalog `requires`, src/core/requirements.ts). */
export interface JobGate {
  readonly state: 'passed' | 'failed' | 'not run' | 'waiting' | 'to judge';
  /** The required jobs it names, each with its verdict and commit. */
  readonly checks: readonly GateCheck[];
  readonly words: string;
}

const gateChecks = (value: unknown): readonly GateCheck[] => (Array.isArray(value) ? (value as GateCheck[]) : []);
const checkWords = (checks: readonly GateCheck[]) =>
  checks.map((c) => `${c.type} ${c.jobId} (${c.verdict}) at ${shortSha(c.sha)}`).join('; ');

/**
 * What a job's gate decided, or waits for: undefined for a type that requires nothing, and for a
 * job that ended before its gate was judged (cancelled, or failed for another reason).
 */
export function jobGate(
  job: Pick<JobRecord, 'type' | 'status' | 'pin' | 'result' | 'error' | 'progress'>,
): JobGate | undefined {
  const required = requiredTypes(job.type);
  if (required.length === 0) return undefined;
  const at = job.pin ? `at ${shortSha(job.pin.sha)}` : 'at its commit';
  const passed = gateChecks(job.result?.['gate']);
  if (job.status === 'SUCCEEDED' && passed.length > 0)
    return { state: 'passed', checks: passed, words: `passed: ${checkWords(passed)}` };
  if (job.error?.reason === 'REQUIREMENT_FAILED') {
    const failed = gateChecks(job.error.gate);
    return {
      state: 'failed',
      checks: failed,
      words: failed.length > 0 ? `failed: ${checkWords(failed)}: nothing was done` : `failed: ${job.error.message}`,
    };
  }
  if (job.error?.reason === 'REQUIREMENT_NOT_RUN')
    return {
      state: 'not run',
      checks: [],
      words: `not run: no ${required.join(' or ')} job ${at} before it: nothing was done`,
    };
  if (TERMINAL_STATUSES.includes(job.status)) return undefined;
  const waiting = job.progress?.['waitingFor'];
  if (typeof waiting === 'string') return { state: 'waiting', checks: [], words: waiting };
  return {
    state: 'to judge',
    checks: [],
    words: `requires ${required.join(' and ')} to pass ${at}, judged when it runs`,
  };
}

/** One line about a job's outcome; `status --json` has the whole record. */
export function jobSummary(job: JobRecord): string {
  if (job.status === 'CANCELLED' && job.error?.reason === SKIPPED_REASON)
    return `cancelled while skipped${job.blockedBy ? ` (blocked by ${job.blockedBy})` : ''}`;
  if (job.status === 'CANCELLED' && job.progress?.['buildId'] !== undefined)
    return `cancelled while running (build ${job.progress['buildId']} stopped)`;
  if (job.error) return `${job.error.reason}: ${job.error.message}`;
  if (job.blockedBy) return `blocked by ${job.blockedBy}`;
  if (job.result) return resultSummary(job);
  if (job.pin) return `pinned to ${shortSha(job.pin.sha)}`;
  return '';
}

/** The results the built-in job types record; any other result as compact JSON. */
export function resultSummary(job: Pick<JobRecord, 'type' | 'result'>): string {
  const result = job.result ?? {};
  const text = (key: string) =>
    typeof result[key] === 'string' || typeof result[key] === 'number' ? String(result[key]) : undefined;
  const verdict = verdictWords(job);
  if (verdict) return `${verdict} (exit ${text('exitCode') ?? '?'}) at ${shortSha(text('sha')) ?? '?'}`;
  const commit = text('commitSha');
  if (commit) return `commit ${shortSha(commit)}${result['alreadyApplied'] === true ? ' (already on the branch)' : ''}`;
  const url = text('url');
  if (url) return `pull request #${text('number') ?? '?'} ${url}`;
  const json = JSON.stringify(result);
  return json.length > SUMMARY_CHARS ? `${json.slice(0, SUMMARY_CHARS - 1)}…` : json;
}

/** `N other request(s) reused this job id`, or undefined when none did. */
export function conflictSummary(conflicts: readonly ConflictAttempt[]): string | undefined {
  if (conflicts.length === 0) return undefined;
  return `CONFLICT: ${conflicts.length} other request${conflicts.length === 1 ? '' : 's'} reused this job id and ${conflicts.length === 1 ? 'was' : 'were'} refused`;
}
