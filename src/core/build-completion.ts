/**
 * The build-completion path: how a command stage's job gets its verdict once its build ends, with
 * no function waiting for it. A completion (CodeBuild's "Build State Change" event on AWS, the
 * local runner's exit locally, or the reconciler's answer) is recorded in one conditional write
 * fenced on the build id recorded for the job and on its RUNNING status, so a late, duplicate or
 * out-of-order completion, or one of an earlier run's build, changes nothing. The delivery whose
 * write wins reports the outcome: a failed job's message copy goes to its stage's DLQ (triage stays
 * the same as for any failed job), the outcome event is published, and the job is marked reported.
 * A reporter that dies in between leaves the job due: the reconciler reports it.
 *
 * `createBuildEventsHandler` is the build-events queue's batch handler; the platform hands it the
 * parser of its completion events (src/adapters for CodeBuild, tools/local for the local runner).
 */
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type * as z from 'zod/mini';
import { commandStageOf } from '../../contract/job-types';
import { RUN_ATTRIBUTE } from '../../contract/messages';
import { REPORT_GRACE_SECONDS } from '../../contract/runtime-env';
import { describeIssues, jobAttributes, tenantGroupId } from './envelope';
import { errorMessage, PermanentJobError } from './errors';
import { processStandardBatch } from './fifo-batch';
import { commandVerdict } from './jobs/command-stage';
import { backoffSeconds, EVENT_OF, eventDetail, receiveCount, recordedVerdict, type BackoffSettings } from './pipeline';
import type {
  BuildCompletion,
  Clock,
  EventPublisher,
  JobLogger,
  JobMetrics,
  JobRecord,
  Ledger,
  QueueOps,
} from './ports';

export interface BuildCompletionDeps {
  readonly ledger: Ledger;
  readonly queueOps: Pick<QueueOps, 'sendToDlq'>;
  readonly events: EventPublisher;
  readonly metrics: JobMetrics;
  readonly logger: JobLogger;
  readonly clock: Clock;
  /** The DLQ of each command stage's queue, by job type: where a failed job's message copy goes. */
  readonly stageDlqUrls: Readonly<Record<string, string>>;
}

/** What a completion did. */
export type CompletionOutcome =
  /** It recorded the verdict and reported the outcome. */
  | 'completed'
  /** Late, duplicate, of another run's build, or of an unknown job: nothing changed. */
  | 'ignored'
  /**
   * The job's stage is still starting it (IN_FLIGHT, with this build or none recorded yet: the
   * start's answer may have been lost and a redelivery will record this build): try again later.
   */
  | 'notRunningYet';

/** Why a completion cannot be recorded on this record, or undefined when it can. */
function refusal(record: JobRecord | undefined, buildId: string): Exclude<CompletionOutcome, 'completed'> | undefined {
  if (record === undefined) return 'ignored';
  const recorded = record.progress?.['buildId'];
  // A fast build can end before its stage records it (a lost StartBuild answer, a crash): its
  // completion waits for the redelivery that records the build, not for the reconciler.
  if (record.status === 'IN_FLIGHT' && (recorded === undefined || recorded === buildId)) return 'notRunningYet';
  if (recorded !== buildId) return 'ignored';
  return record.status === 'RUNNING' ? undefined : 'ignored';
}

/** Records a build's verdict on its job (fenced on the build id and RUNNING) and reports it. */
export async function completeBuild(
  completion: BuildCompletion,
  deps: BuildCompletionDeps,
): Promise<CompletionOutcome> {
  const { ledger, clock, logger } = deps;
  const ids = { jobId: completion.jobId, buildId: completion.buildId };
  const verdict = commandVerdict(
    completion.status,
    { type: completion.jobType as JobRecord['type'], sha: completion.sha },
    completion.buildId,
  );
  const now = clock.now();
  const outcome = await ledger.finishBuild({
    jobId: completion.jobId,
    buildId: completion.buildId,
    verdict,
    now,
    reportBy: now + REPORT_GRACE_SECONDS * 1000,
  });
  if (outcome.kind === 'refused') {
    // A RUNNING record with this build that refused the write changed meanwhile: look again later.
    const why = refusal(outcome.record, completion.buildId) ?? 'notRunningYet';
    logger.info(
      why === 'ignored'
        ? 'completion changes nothing (late, duplicate or stale)'
        : 'job not RUNNING yet: completion retried later',
      {
        ...ids,
        status: outcome.record?.status,
        recordedBuildId: outcome.record?.progress?.['buildId'],
      },
    );
    return why;
  }
  // What the user cares about first ("tests failed"), then the job's status (a failing test run is a job that SUCCEEDED).
  const said = verdict.status === 'SUCCEEDED' ? verdict.result.summary : `${verdict.error.reason} (no verdict)`;
  logger.info(`build finished: ${said}`, { ...ids, status: verdict.status });
  try {
    await reportOutcome(outcome.record, deps);
  } catch (error) {
    // The verdict stands; retrying this completion could not report it (its write is done), the reconciler does.
    logger.error('verdict recorded but not reported: the reconciler reports it after the grace period', {
      ...ids,
      error: errorMessage(error),
    });
  }
  return 'completed';
}

/**
 * Reports a verdict the completion path recorded: the message copy on the stage DLQ when the job
 * failed, the metric, the outcome event, then the mark that takes the job off the due index.
 */
export async function reportOutcome(record: JobRecord, deps: BuildCompletionDeps): Promise<void> {
  const verdict = recordedVerdict(record);
  const buildId = record.progress?.['buildId'];
  if (verdict === undefined || verdict.status === 'SKIPPED' || buildId === undefined) {
    throw new Error(`job ${record.jobId} (${record.status}) has no build verdict to report`);
  }
  if (verdict.status === 'FAILED') {
    const dlqUrl = deps.stageDlqUrls[record.type];
    if (dlqUrl === undefined) throw new Error(`no stage DLQ for job type ${record.type}`);
    const body = record.stageMessage ?? JSON.stringify(jobAttributes(record));
    // The run it failed in: a redrive takes only the copy of the job's current run (tools/operator/dlq-messages.ts copyMismatch).
    const attributes = { ...jobAttributes(record), [RUN_ATTRIBUTE]: String(record.run ?? 0) };
    await deps.queueOps.sendToDlq(dlqUrl, { body, attributes, groupId: tenantGroupId(record.tenantId) }, verdict.error);
  }
  const { event, metric } = EVENT_OF[verdict.status];
  deps.metrics.count(metric, record.type);
  if (event) await deps.events.publish(event, eventDetail(record, verdict, record.attempt));
  await deps.ledger.markReported({ jobId: record.jobId, buildId, now: deps.clock.now() });
}

/** Thrown by a parser for a body that is not a completion event it can read. */
export class InvalidBuildEventError extends PermanentJobError {
  constructor(message: string) {
    super('INVALID_BUILD_EVENT', message);
  }
}

/** A build-events message body read with `schema`; InvalidBuildEventError naming `what` it is not. */
export function readBuildEvent<T>(body: string, schema: z.ZodMiniType<T>, what: string): T {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    throw new InvalidBuildEventError('the message is not JSON');
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new InvalidBuildEventError(`not ${what}: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

/** Turns a build-events message body into a completion; undefined for a state change that is not an end. */
export type BuildEventParser = (body: string) => BuildCompletion | undefined;

export interface BuildEventsDeps extends BuildCompletionDeps {
  /** Also moves unreadable events to the build-events DLQ and backs off retries. */
  readonly queueOps: QueueOps;
  readonly parse: BuildEventParser;
  /** @default COMPLETION_BACKOFF */
  readonly backoff?: BackoffSettings;
}

/** A completion that found its job not RUNNING yet is retried soon: the stage is a write away from it. */
export const COMPLETION_BACKOFF: BackoffSettings = { baseSeconds: 2, capSeconds: 120 };

/** The build-events queue's batch handler: one completion per record, records independent. */
export function createBuildEventsHandler(deps: BuildEventsDeps): (event: SQSEvent) => Promise<SQSBatchResponse> {
  return (event) => processStandardBatch(event.Records, (record) => handleBuildEvent(record, deps));
}

/**
 * The completion a build-events message holds, or undefined for a state change that is not an end.
 * Only a command stage's job has a build: a completion naming any other type (or none the catalog
 * knows) can never be recorded, so it is as unreadable as a body that is not an event.
 */
function readCompletion(body: string, parse: BuildEventParser): BuildCompletion | undefined {
  const completion = parse(body);
  if (completion !== undefined && commandStageOf(completion.jobType) === undefined) {
    throw new InvalidBuildEventError(
      `job ${completion.jobId}: ${completion.jobType} is not a command stage (contract/job-types.ts): no build of it can complete`,
    );
  }
  return completion;
}

async function handleBuildEvent(record: SQSRecord, deps: BuildEventsDeps): Promise<boolean> {
  const { logger } = deps;
  let completion: BuildCompletion | undefined;
  try {
    completion = readCompletion(record.body, deps.parse);
  } catch (error) {
    if (!(error instanceof InvalidBuildEventError)) throw error;
    logger.warn('unreadable build event moved to the DLQ', { messageId: record.messageId, error: error.message });
    await deps.queueOps.moveToDlq(record, { reason: error.reason, message: error.message });
    return true;
  }
  if (completion === undefined) return true;
  try {
    if ((await completeBuild(completion, deps)) !== 'notRunningYet') return true;
  } catch (error) {
    logger.warn('completion failed: retrying later', {
      jobId: completion.jobId,
      buildId: completion.buildId,
      error: errorMessage(error),
    });
  }
  const seconds = backoffSeconds(receiveCount(record), deps.backoff ?? COMPLETION_BACKOFF);
  await deps.queueOps
    .changeVisibility(record, seconds)
    .catch((e: unknown) => logger.warn('back-off failed', { error: errorMessage(e) }));
  return false;
}
