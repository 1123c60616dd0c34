/**
 * Waiting for jobs to finish: the ledger read again until every job is terminal, the deadline
 * passes or the caller gives up. The CLI's `wait` and the MCP server's `wait_for_jobs` both wait
 * here, so "finished" and "succeeded" mean the same on every surface.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { TERMINAL_STATUSES } from '../../src/core/ports';
import type { Connection } from './connection';
import { NotFoundError } from './errors';
import { readJobs, UNKNOWN_JOB_HINT, type JobState } from './jobs';
import { jobSucceeded, statusLabel } from './views';

/** How often the ledger is read while waiting. */
export const WAIT_POLL_MS = 500;

export type WaitState = JobState & { readonly jobId: string };

export function jobFinished(state: JobState): boolean {
  return TERMINAL_STATUSES.includes(state.job.status);
}

/**
 * `t1=tests failed p1=SUCCEEDED`: each job by the label its table shows (statusLabel), so a test run
 * that ran to a red verdict never reads SUCCEEDED while it is waited for. The CLI's progress and the
 * MCP server's progress notifications print it.
 */
export function progressLine(states: readonly WaitState[]): string {
  return states.map((s) => `${s.jobId}=${statusLabel(s.job)}`).join(' ');
}

/** Finished and succeeded; a conflict makes the id ambiguous, so it cannot say the work asked for under it succeeded. */
export function stateSucceeded(state: JobState): boolean {
  return jobFinished(state) && jobSucceeded(state.job) && state.conflicts.length === 0;
}

export interface WaitOptions {
  /** Give up after this long. */
  readonly timeoutMs: number;
  /** Called with every read whose progressLine differs from the one before (the first read included). */
  readonly onChange?: (states: readonly WaitState[]) => void | Promise<void>;
  /** Stops waiting early (a cancelled request): the last states are returned, not finished. */
  readonly signal?: AbortSignal;
  /** @default WAIT_POLL_MS */
  readonly pollMs?: number;
}

export interface WaitOutcome {
  readonly states: readonly WaitState[];
  /** Every job is terminal. */
  readonly finished: boolean;
  /** Every job finished and succeeded. */
  readonly succeeded: boolean;
}

/**
 * Reads the jobs until every one is terminal, the timeout passes or `signal` aborts. A job id the
 * ledger does not know fails at once (NotFoundError): known once means known for good, so waiting
 * for it would only wait out the timeout.
 */
export async function waitForJobs(
  connection: Connection,
  jobIds: readonly string[],
  options: WaitOptions,
): Promise<WaitOutcome> {
  const deadline = Date.now() + options.timeoutMs;
  let last = '';
  for (;;) {
    const read = await readJobs(connection, jobIds);
    if (read.unknown.length > 0) {
      throw new NotFoundError(
        `${read.unknown.map((id) => `job ${id}`).join(', ')} not in the ledger of ${(await connection.target()).label} (${UNKNOWN_JOB_HINT})`,
      );
    }
    const line = progressLine(read.states);
    if (line !== last) await options.onChange?.(read.states);
    last = line;
    const finished = read.states.every(jobFinished);
    if (finished || Date.now() >= deadline || options.signal?.aborted) {
      return { states: read.states, finished, succeeded: finished && read.states.every(stateSucceeded) };
    }
    const pause = Math.min(options.pollMs ?? WAIT_POLL_MS, Math.max(0, deadline - Date.now()));
    await sleep(pause, undefined, { signal: options.signal }).catch(() => undefined);
  }
}
