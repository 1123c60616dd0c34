/**
 * The build reconciler: runs on a schedule (an EventBridge schedule on AWS, an interval locally)
 * and finishes what the build-completion path could not. CodeBuild delivers its events on a
 * best-effort basis, and a reporter can die between recording a verdict and reporting it, so:
 * - a RUNNING job past its due time (its build's queued timeout and timeout plus a margin) is looked
 *   up in the command runner, all such jobs in one request (never a loop of polls), and completed
 *   through the same fenced write as an event; a build still going is looked at again later, an
 *   unknown one fails the job (TEST_RUN_ERROR);
 * - a job whose verdict was recorded but not reported within the grace period is reported;
 * - a job cancelled while its build ran (decisions §33) has its build stopped, then leaves the due
 *   index: the cancel is an operator's write to the ledger, the stop is the reconciler's, so a
 *   cancel that crashed after its write still stops its build, and only the reconciler holds the
 *   permission to stop builds.
 * Each run publishes how many jobs were overdue and the age of the oldest: the alarm on it fires
 * when jobs stay overdue, or when the reconciler stops running.
 *
 * A runner whose answers cost nothing (the local one reads its own files) is asked about every
 * RUNNING job at each run, not only overdue ones (`askBeforeDue`): the local platform's queues live
 * in its memory, so a completion lost with them (a kill, a failed send) is found within one run
 * instead of after the build's timeout.
 */
import { BUILD_DUE_MARGIN_SECONDS } from '../../contract/runtime-env';
import { completeBuild, reportOutcome, type BuildCompletionDeps } from './build-completion';
import { errorMessage } from './errors';
import {
  TERMINAL_STATUSES,
  type BuildStopper,
  type FinishedRunStatus,
  type JobRecord,
  type TestRunner,
  type TestRunStatus,
} from './ports';

export interface ReconcilerDeps extends BuildCompletionDeps {
  readonly runner: Pick<TestRunner, 'describe'> & BuildStopper;
  /** Jobs looked at per run (CodeBuild's BatchGetBuilds takes at most 100 ids). @default 100 */
  readonly batchSize?: number;
  /** Ask the runner about every RUNNING job, due or not (see above). @default false */
  readonly askBeforeDue?: boolean;
}

export interface ReconcileOptions {
  /**
   * Every job listed is treated as due: after a restart of the local platform, the last process's
   * reporters and builds are gone, so nothing it left is worth waiting for.
   */
  readonly afterRestart?: boolean;
}

export interface ReconcileReport {
  /** Jobs that were due. */
  readonly due: number;
  /** Jobs completed from the runner's answer, and jobs whose recorded verdict was reported. */
  readonly completed: number;
  readonly reported: number;
  /** Builds still going past their due time: looked at again later. */
  readonly stillRunning: number;
  /** Cancelled jobs whose build was stopped (or that had none to stop). */
  readonly stopped: number;
  /** How long the oldest due job has been due (0 when none was). */
  readonly oldestOverdueSeconds: number;
}

export const RECONCILE_BATCH = 100;

/** One reconciler run; every due job is tried, and failures are thrown together at the end. */
export async function reconcileBuilds(deps: ReconcilerDeps, options: ReconcileOptions = {}): Promise<ReconcileReport> {
  const { ledger, clock, logger } = deps;
  const now = clock.now();
  const lookAhead = options.afterRestart === true || deps.askBeforeDue === true;
  const listed = await ledger.listDue(lookAhead ? Number.MAX_SAFE_INTEGER : now, deps.batchSize ?? RECONCILE_BATCH);
  const isOverdue = (r: JobRecord) => options.afterRestart === true || (r.dueAt ?? now) <= now;
  // Looked at now: the overdue, and (asking before due) every RUNNING job; a verdict not yet
  // reported waits out its grace period, its reporter may still be at it. A cancelled job's stop
  // is due from its cancel on: not a build overdue (the alarm's count).
  const due = listed.filter((r) => isOverdue(r) && r.status !== 'CANCELLED');
  const looked = listed.filter((r) => isOverdue(r) || r.status === 'RUNNING');
  const running = looked.filter((r) => r.status === 'RUNNING' && r.progress?.['buildId'] !== undefined);
  const statuses =
    running.length > 0 ? await deps.runner.describe(running.map(buildIdOf)) : new Map<string, TestRunStatus>();
  const failures: unknown[] = [];
  let completed = 0;
  let reported = 0;
  let stillRunning = 0;
  let stopped = 0;
  for (const record of looked) {
    try {
      if (record.status === 'CANCELLED') {
        await stopCancelledBuild(record, deps);
        stopped += 1;
      } else if (record.status === 'RUNNING') {
        const status = statuses.get(buildIdOf(record)) ?? lost(buildIdOf(record));
        if (status.state === 'RUNNING' && !isOverdue(record)) continue;
        if (status.state === 'RUNNING') {
          stillRunning += 1;
          await ledger.postponeDue({
            jobId: record.jobId,
            buildId: buildIdOf(record),
            dueAt: now + BUILD_DUE_MARGIN_SECONDS * 1000,
            now,
          });
          logger.warn('build still running past its due time: looking again later', {
            jobId: record.jobId,
            buildId: buildIdOf(record),
          });
        } else if (
          record.pin &&
          (await completeBuild(
            { buildId: buildIdOf(record), jobId: record.jobId, jobType: record.type, sha: record.pin.sha, status },
            deps,
          )) === 'completed'
        ) {
          completed += 1;
        }
      } else if (TERMINAL_STATUSES.includes(record.status) && record.reportedAt === undefined) {
        await reportOutcome(record, deps);
        reported += 1;
      }
    } catch (error) {
      logger.error('reconciling a job failed', { jobId: record.jobId, error: errorMessage(error) });
      failures.push(error);
    }
  }
  const oldestOverdueSeconds = due.reduce(
    (oldest, r) => Math.max(oldest, Math.floor((now - (r.dueAt ?? now)) / 1000)),
    0,
  );
  deps.metrics.gauge?.('BuildsOverdue', due.length, 'Count');
  deps.metrics.gauge?.('OldestOverdueBuildSeconds', oldestOverdueSeconds, 'Seconds');
  if (completed + reported > 0) deps.metrics.gauge?.('BuildsReconciled', completed + reported, 'Count');
  const report = { due: due.length, completed, reported, stillRunning, stopped, oldestOverdueSeconds };
  if (due.length + completed + stopped > 0) logger.info('reconciled builds', { ...report });
  if (failures.length > 0)
    throw new AggregateError(failures, `${failures.length} of ${looked.length} jobs could not be reconciled`);
  return report;
}

/**
 * Stops the build of a job cancelled while it ran, then takes the job off the due index. A job
 * cancelled before its build was recorded has none to stop; a build its crashed worker started
 * without recording it is not known here and runs to its end, its completion changing nothing.
 */
async function stopCancelledBuild(record: JobRecord, deps: ReconcilerDeps): Promise<void> {
  const buildId = record.progress?.['buildId'];
  if (buildId !== undefined) await deps.runner.stop(buildId);
  deps.logger.info(
    buildId === undefined
      ? 'cancelled before its build was recorded: nothing to stop'
      : 'build of a cancelled job stopped',
    { jobId: record.jobId, buildId },
  );
  await deps.ledger.markBuildStopped({ jobId: record.jobId, now: deps.clock.now() });
}

function buildIdOf(record: JobRecord): string {
  return record.progress?.['buildId'] ?? '';
}

/** The runner does not know the build: it will never report, so the job fails without a verdict. */
function lost(buildId: string): FinishedRunStatus {
  return { state: 'ERROR', status: 'LOST', message: `the command runner does not know build ${buildId}` };
}
