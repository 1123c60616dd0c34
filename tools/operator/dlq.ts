/**
 * The dead-letter queues as an operator sees them: what waits there and why (read from the ledger,
 * which knows every job it moved to a DLQ, so listing never receives a message: a receive raises
 * its receive count, and a FIFO DLQ only hands out the head of each group), and the redrive that
 * sends jobs back to run again. Only redrive (and peek, on request) receive.
 */
import { DLQ_RETENTION_DAYS } from '../../contract/topology';
import { DLQ_ATTRIBUTES } from '../../contract/messages';
import { messageGroupId } from '../../src/core/envelope';
import { conflictQueueOf, dismissRefusal, dlqQueueOf, isOffTheDlq, waitsOnDlq } from '../../src/core/ledger';
import type { ConflictAttempt, DlqEntry, JobDismissal, JobRecord, WorkspaceRecord } from '../../src/core/ports';
import type { Connection } from './connection';
import type { DlqMessage } from './dlq-messages';
import { InvalidRequestError, NotFoundError, OutcomeError } from './errors';
import { requireValidId } from './ids';
import { requireServedQueue, type QueueEndpoint, type Target } from './targets';

// The SQS operations load with the SQS SDK, only when a DLQ is read or swept (require: see targets.ts).
const dlqMessages = (): typeof import('./dlq-messages') => require('./dlq-messages');
const buildEventsDlq = (): typeof import('./build-events-dlq') => require('./build-events-dlq');

const DAY_MS = 86_400_000;

/** The queues whose DLQs a request is about: the one named (`agent-jobs`, `run-tests`, ...), or all. */
export function selectQueues(target: Target, name: string | undefined): readonly QueueEndpoint[] {
  if (name === undefined) return target.queues;
  const queue = target.queues.find((q) => q.name === name || `${q.name}.fifo` === name);
  if (!queue) {
    requireServedQueue(target, name); // a queue of a job type declared after the platform started
    throw new InvalidRequestError(`unknown queue ${name}: one of ${target.queues.map((q) => q.name).join(', ')}`);
  }
  return [queue];
}

/** The DLQs a request is about: the jobs' (selectQueues) and the build-events queue's, when it is the one named or none is. */
export function selectWithBuildEvents(
  target: Target,
  name: string | undefined,
): { jobs: readonly QueueEndpoint[]; buildEvents?: QueueEndpoint } {
  const events = target.buildEvents;
  if (events !== undefined && name === events.name) return { jobs: [], buildEvents: events };
  return {
    jobs: selectQueues(target, name),
    ...(name === undefined && events !== undefined && { buildEvents: events }),
  };
}

/** One job (or refused request) waiting on a DLQ, as the ledger knows it. */
export interface DlqRow {
  readonly queue: string;
  readonly jobId: string;
  readonly workspaceId: string;
  readonly tenantId: string;
  readonly type: string;
  /** FAILED, SKIPPED, or CONFLICT for a refused request that reused the job id. */
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
  readonly blockedBy?: string;
  readonly attempt?: number;
  /** When it went to the DLQ. */
  readonly since: string;
  /** SQS deleted it at the end of the DLQ's retention: the ledger still has the job. */
  readonly expired: boolean;
}

/** Whether a message sent to a DLQ at `since` (an ISO time) is gone by `now`: SQS deletes it at the end of the DLQ's retention. */
export function pastDlqRetention(since: string, now: number): boolean {
  return Date.parse(since) + DLQ_RETENTION_DAYS * DAY_MS < now;
}

/** A SKIPPED job whose replay is not on its way (no redriveToken: its message has not left the DLQ for it). */
export function isSkippedAwaitingReplay(job: Pick<JobRecord, 'status' | 'redriveToken'>): boolean {
  return job.status === 'SKIPPED' && job.redriveToken === undefined;
}

/** The ledger's DLQ list as rows (pure: `now` decides what the retention has expired). */
export function dlqRows(entries: readonly DlqEntry[], now: number): DlqRow[] {
  const expired = (since: string) => pastDlqRetention(since, now);
  return entries.map((entry): DlqRow => {
    if (entry.kind === 'job') return jobRow(entry.record, expired(entry.record.updatedAt));
    const { attempt } = entry;
    return {
      queue: conflictQueueOf(attempt.type, attempt.seenBy) ?? '',
      jobId: attempt.jobId,
      workspaceId: attempt.workspaceId,
      tenantId: attempt.tenantId,
      type: attempt.type,
      status: 'CONFLICT',
      reason: 'CONFLICT',
      message: `a different request reused job id ${attempt.jobId} and was refused; the original job is kept`,
      since: attempt.at,
      expired: expired(attempt.at),
    };
  });
}

function jobRow(job: JobRecord, expired: boolean): DlqRow {
  return {
    queue: dlqQueueOf(job),
    jobId: job.jobId,
    workspaceId: job.workspaceId,
    tenantId: job.tenantId,
    type: job.type,
    status: job.status,
    reason: job.error?.reason,
    message: job.error?.message,
    blockedBy: job.blockedBy,
    attempt: job.attempt,
    since: job.updatedAt,
    expired,
  };
}

export interface DlqQueueDepth {
  readonly queue: string;
  /** SQS's approximate count (visible and in flight), read without receiving. */
  readonly depth: number;
  /** How many of its messages the ledger lists (expired ones aside). */
  readonly listed: number;
  /** What its messages are: jobs, or build events (the build-events queue's DLQ, which the ledger never lists). */
  readonly carries: 'jobs' | 'buildEvents';
}

export interface DlqListing {
  readonly queues: readonly DlqQueueDepth[];
  readonly rows: readonly DlqRow[];
}

/**
 * What waits on the DLQs (or on one, `queue`): the ledger's rows and each queue's depth. A depth
 * above what is listed is messages the ledger cannot know (a body that is not a job, a job that
 * failed before its claim): `peekDlq` shows them.
 */
export async function listDlq(
  connection: Connection,
  options: { queue?: string; now?: number; withBuildEvents?: boolean } = {},
): Promise<DlqListing> {
  const target = await connection.target();
  const { jobs: queues, buildEvents } = options.withBuildEvents
    ? selectWithBuildEvents(target, options.queue)
    : { jobs: selectQueues(target, options.queue) };
  const names = new Set(queues.map((q) => q.name));
  const rows = dlqRows(await (await connection.ledger()).listDlq(), options.now ?? Date.now()).filter((r) =>
    names.has(r.queue),
  );
  const { sqs } = await connection.clients();
  const depths: DlqQueueDepth[] = [];
  // GetQueueAttributes, not a receive: counting leaves the messages as they are.
  for (const queue of queues) {
    depths.push({
      queue: queue.name,
      depth: await dlqMessages().approximateDepth(sqs, queue),
      listed: rows.filter((r) => r.queue === queue.name && !r.expired).length,
      carries: 'jobs',
    });
  }
  if (buildEvents)
    depths.push({
      queue: buildEvents.name,
      depth: await dlqMessages().approximateDepth(sqs, buildEvents),
      listed: 0,
      carries: 'buildEvents',
    });
  return { queues: depths, rows };
}

export interface DlqJob {
  readonly job: JobRecord;
  readonly conflicts: readonly ConflictAttempt[];
  /** Where it (and each refused request that reused its id) waits. */
  readonly rows: readonly DlqRow[];
  /** What to do next, in words. */
  readonly next: string;
}

/** One job on a DLQ by id, from the ledger (receives nothing); OutcomeError when nothing of it waits there. */
export async function showDlqJob(connection: Connection, jobId: string, now = Date.now()): Promise<DlqJob> {
  const ledger = await connection.ledger();
  const [job, conflicts] = await Promise.all([ledger.getJob(jobId), ledger.getConflicts(jobId)]);
  if (!job) throw new NotFoundError(`job ${jobId} is not in the ledger of ${(await connection.target()).label}`);
  const entries = jobDlqEntries(job, conflicts);
  if (entries.length === 0) throw new OutcomeError(`${jobStanding(job)}: nothing of it waits on a DLQ`);
  return { job, conflicts, rows: dlqRows(entries, now), next: nextStep(job) };
}

/** What of a job waits on a DLQ: the job itself (waitsOnDlq), and each refused request that reused its id, but for those refused at enqueue. */
export function jobDlqEntries(job: JobRecord, conflicts: readonly ConflictAttempt[]): DlqEntry[] {
  return [
    ...(waitsOnDlq(job) ? [{ kind: 'job' as const, record: job }] : []),
    ...conflicts.filter((c) => c.seenBy !== 'enqueue').map((attempt) => ({ kind: 'conflict' as const, attempt })),
  ];
}

/** `job p1 is FAILED, dismissed by alice at <time> (<reason>)`: its status, and its dismissal when it has one. */
function jobStanding(job: JobRecord): string {
  const { dismissed } = job;
  return `job ${job.jobId} is ${job.status}${dismissed ? `, ${dismissalWords(dismissed)}` : ''}`;
}

export function dismissalWords(dismissal: JobDismissal): string {
  return `dismissed by ${dismissal.by} at ${dismissal.at} (${dismissal.reason})`;
}

/** What an operator does with a job on a DLQ. */
export function nextStep(job: JobRecord): string {
  if (job.status === 'SKIPPED')
    return `"workspace unblock ${job.workspaceId} --replay" runs it in order (or --drop cancels it)`;
  // A redrive sends the same request again: an invalid one would fail again.
  if (job.status === 'FAILED' && job.error?.reason === 'INVALID_JOB') {
    return `a redrive would send the same invalid request: send the work again, fixed, with a new job id; "dlq dismiss ${job.jobId} --reason ..." takes this copy off the DLQ`;
  }
  if (job.status === 'FAILED') return `fix the cause, then "dlq redrive ${job.jobId}" runs it again`;
  return 'nothing: a refused conflicting request never runs (it leaves the DLQ at the end of its retention)';
}

/** Whether a DLQ message is a refused request that reused a job id: a redrive would be refused again. */
function isConflict(message: DlqMessage): boolean {
  return message.attributes[DLQ_ATTRIBUTES.reason] === 'CONFLICT';
}

export interface Redriven {
  readonly queue: string;
  readonly jobId: string;
  readonly messageId: string;
}

export interface LeftOnDlq {
  readonly queue: string;
  readonly jobId: string;
  readonly why: string;
}

/** A copy of a job settled off the DLQ (cancelled, or its failure dismissed), deleted without running. */
export interface SettledCopy {
  readonly queue: string;
  readonly jobId: string;
  readonly status: string;
  /** How the job was settled: `cancelled ...`, or its dismissal (who, when, why). */
  readonly why: string;
}

export interface RedriveResult {
  readonly redriven: readonly Redriven[];
  readonly left: readonly LeftOnDlq[];
  /** Copies an interrupted cancel or dismissal left (a redrive of everything deletes them). */
  readonly removed: readonly SettledCopy[];
}

/**
 * The one rule for a copy an interrupted `cancel` or `dlq dismiss` left: a DLQ message that is the
 * copy of a job settled off the DLQ (isOffTheDlq; copyMismatch finds it is the job's own copy) is
 * nobody's to act on, so the sweeps that meet it (`workspace unblock`, `dlq redrive` of everything)
 * delete it instead of running or keeping it. Undefined for any other message.
 */
export function settledCopy(
  queue: QueueEndpoint,
  message: DlqMessage,
  job: JobRecord | undefined,
): SettledCopy | undefined {
  if (job === undefined || !isOffTheDlq(job) || dlqMessages().copyMismatch(queue, message, job) !== undefined)
    return undefined;
  const why = job.dismissed ? dismissalWords(job.dismissed) : 'cancelled before: it never runs';
  return { queue: queue.name, jobId: job.jobId, status: job.status, why };
}

/**
 * Sends jobs on the DLQs back to their queue to run again: the ones named (`jobIds`), or all (of
 * one queue's DLQ with `queue`), order kept per workspace. Groups of BLOCKED workspaces are left
 * (unblockWorkspace replays them), and so are refused conflicting requests (they would be refused
 * again). A redrive of everything deletes the copies an interrupted cancel or dismissal left
 * (settledCopy), so it leaves on the DLQs only what `dlq list` lists. A named job is reached behind the other messages of its workspace, which keep their order.
 */
export async function redrive(
  connection: Connection,
  options: { jobIds?: readonly string[]; queue?: string } = {},
): Promise<RedriveResult> {
  for (const jobId of options.jobIds ?? []) requireValidId('jobId', jobId);
  const target = await connection.target();
  if (options.jobIds?.length) return redriveNamed(connection, selectQueues(target, options.queue), options.jobIds);
  const { jobs, buildEvents } = selectWithBuildEvents(target, options.queue);
  const result = await redriveAll(connection, jobs);
  if (buildEvents === undefined) return result;
  const events = await buildEventsDlq().redriveBuildEvents((await connection.clients()).sqs, buildEvents);
  return {
    redriven: [
      ...result.redriven,
      ...events.redriven.map((e) => ({
        queue: buildEvents.name,
        jobId: e.summary.jobId ?? '',
        messageId: e.messageId,
      })),
    ],
    left: [
      ...result.left,
      ...events.left.map((e) => ({ queue: buildEvents.name, jobId: e.summary.jobId ?? '', why: e.why })),
    ],
    removed: result.removed,
  };
}

async function redriveAll(connection: Connection, queues: readonly QueueEndpoint[]): Promise<RedriveResult> {
  const { sqs } = await connection.clients();
  const ledger = await connection.ledger();
  const redriven: Redriven[] = [];
  const left: LeftOnDlq[] = [];
  const removed: SettledCopy[] = [];
  for (const queue of queues) {
    const blocked = new Map<string, boolean>();
    await dlqMessages().walkDlq(sqs, queue, async (message) => {
      const { jobId, workspaceId } = dlqMessages().messageJob(message);
      if (isConflict(message)) {
        left.push({ queue: queue.name, jobId, why: 'a refused conflicting request: it would be refused again' });
        return 'hold';
      }
      const job = await ledger.getJob(jobId);
      // Deleted even in a BLOCKED workspace's group: it holds no place in the workspace's order.
      const settled = settledCopy(queue, message, job);
      if (settled !== undefined) {
        removed.push(settled);
        return 'delete';
      }
      if (queue.fifo && workspaceId !== undefined) {
        if (!blocked.has(workspaceId))
          blocked.set(workspaceId, (await ledger.getWorkspace(workspaceId))?.state === 'BLOCKED');
        if (blocked.get(workspaceId)) {
          left.push({
            queue: queue.name,
            jobId,
            why: `workspace ${workspaceId} is BLOCKED (group ${messageGroupId(workspaceId)})`,
          });
          return 'hold';
        }
      }
      const outcome = await dlqMessages().redriveCopy(sqs, ledger, queue, message, job);
      if (!outcome.redriven) {
        left.push({ queue: queue.name, jobId, why: outcome.why });
        if (!queue.fifo) return 'hold';
        // Not a copy of a job to run (forged, stale): it holds no place in the workspace's order, so
        // it moves to its group's tail and the walk goes on to the copies behind it.
        await dlqMessages().requeueAtTail(sqs, queue, message);
        return 'delete';
      }
      redriven.push({ queue: queue.name, jobId, messageId: outcome.messageId });
      return 'delete';
    });
  }
  return { redriven, left, removed };
}

/**
 * The named jobs: each is checked in the ledger first (on a DLQ, its workspace not BLOCKED), then
 * its DLQ is swept for it. On the FIFO DLQ the messages ahead of it in its group are copied to
 * the group's tail, in order, so it is reached without reordering the others.
 */
async function redriveNamed(
  connection: Connection,
  queues: readonly QueueEndpoint[],
  jobIds: readonly string[],
): Promise<RedriveResult> {
  const ledger = await connection.ledger();
  const { sqs } = await connection.clients();
  const left: LeftOnDlq[] = [];
  const wanted = new Map<string, JobRecord>();
  for (const jobId of jobIds) {
    const job = await ledger.getJob(jobId);
    if (!job) throw new NotFoundError(`job ${jobId} is not in the ledger of ${(await connection.target()).label}`);
    const queue = dlqQueueOf(job);
    const why = await redriveRefusal(connection, job);
    if (why) left.push({ queue, jobId, why });
    else wanted.set(jobId, job);
  }
  const redriven: Redriven[] = [];
  for (const queue of queues) {
    const here = [...wanted.values()].filter((j) => dlqQueueOf(j) === queue.name);
    if (here.length === 0) continue;
    const ids = new Set(here.map((j) => j.jobId));
    const groups = new Set(here.map((j) => messageGroupId(j.workspaceId)));
    await dlqMessages().sweepDlq(sqs, queue, {
      inScope: (m) =>
        queue.fifo ? m.groupId !== undefined && groups.has(m.groupId) : ids.has(dlqMessages().messageJob(m).jobId),
      take: async (m) => {
        const { jobId } = dlqMessages().messageJob(m);
        if (!ids.has(jobId) || isConflict(m)) return false;
        // A copy that is not the job the ledger records (a forged jobId attribute) is reported and
        // kept in its place; the walk goes on to the job's own copy.
        const outcome = await dlqMessages().redriveCopy(sqs, ledger, queue, m, wanted.get(jobId));
        if (!outcome.redriven) {
          left.push({ queue: queue.name, jobId, why: outcome.why });
          return false;
        }
        redriven.push({ queue: queue.name, jobId, messageId: outcome.messageId });
        ids.delete(jobId);
        return true;
      },
    });
    for (const jobId of ids)
      left.push({
        queue: queue.name,
        jobId,
        why: 'no message of it on the DLQ (redriven already, or deleted at the end of its retention)',
      });
  }
  return { redriven, left, removed: [] };
}

async function redriveRefusal(connection: Connection, job: JobRecord): Promise<string | undefined> {
  if (job.dismissed !== undefined)
    return `it was ${dismissalWords(job.dismissed)}: send it again as a new job to run it`;
  if (job.status !== 'FAILED' && job.status !== 'SKIPPED') return `it is ${job.status}, not on a DLQ`;
  if (job.pin !== undefined) return undefined; // on its stage's DLQ: no workspace order to keep
  const workspace = await (await connection.ledger()).getWorkspace(job.workspaceId);
  if (workspace?.state === 'BLOCKED')
    return `workspace ${job.workspaceId} is BLOCKED: "workspace unblock ${job.workspaceId} --replay" runs its jobs in order`;
  return undefined;
}

/**
 * A DLQ message as peek shows it: its attributes and the size of its body, not the body; an event
 * of the build-events DLQ also with the build it is about and what to do with it.
 */
export type PeekedMessage = Omit<DlqMessage, 'receiptHandle' | 'body'> & {
  readonly bodyBytes: number;
  readonly buildEvent?: import('./build-events-dlq').BuildEventSummary;
  readonly advice?: string;
};

export interface Peeked {
  readonly shown: readonly PeekedMessage[];
  /** Per FIFO DLQ, about how many messages wait behind the heads shown (a FIFO DLQ hands out one per group). */
  readonly behind: readonly { readonly queue: string; readonly count: number }[];
}

/** Receives the DLQ messages a receive can see now and shows them (raises their receive counts); for what the ledger cannot know. */
export async function peekDlq(connection: Connection, options: { queue?: string } = {}): Promise<Peeked> {
  const { sqs } = await connection.clients();
  const shown: PeekedMessage[] = [];
  const behind: { queue: string; count: number }[] = [];
  const { jobs, buildEvents } = selectWithBuildEvents(await connection.target(), options.queue);
  for (const queue of jobs) {
    const heads = await dlqMessages().peekDlq(sqs, queue);
    for (const { receiptHandle: _handle, body, ...rest } of heads)
      shown.push({ ...rest, bodyBytes: Buffer.byteLength(body) });
    // Counted after the peek released what it received: the depth then includes the heads again.
    const waiting = queue.fifo ? (await dlqMessages().approximateDepth(sqs, queue)) - heads.length : 0;
    if (waiting > 0) behind.push({ queue: queue.name, count: waiting });
  }
  if (buildEvents) {
    const events = buildEventsDlq();
    for (const { receiptHandle: _handle, body, ...rest } of await dlqMessages().peekDlq(sqs, buildEvents)) {
      shown.push({
        ...rest,
        bodyBytes: Buffer.byteLength(body),
        buildEvent: events.buildEventSummary(body),
        advice: events.buildEventAdvice(rest),
      });
    }
  }
  return { shown, behind };
}

export interface RemovedCopies {
  readonly queue: string;
  /** Copies of the job deleted from its DLQ. */
  readonly removed: number;
  /** Messages that name the job but are not its copy (a forged or stale one), left for the operator. */
  readonly left: readonly LeftOnDlq[];
}

/**
 * The one way a job's copy leaves its DLQ without running (a dismissed failure, a cancelled skip,
 * the doctor's clean-up): its DLQ is swept for the messages that are this job as the ledger
 * records it (copyMismatch), which are deleted. On the FIFO DLQ the other messages of its group
 * move behind, in their order. On AWS the DLQ alarm counts ApproximateNumberOfMessagesVisible:
 * deleting the copy is what clears it. Safe to run again: a copy already gone is not looked for twice.
 */
export async function removeDlqCopies(connection: Connection, job: JobRecord): Promise<RemovedCopies> {
  const queueName = dlqQueueOf(job);
  const [queue] = selectQueues(await connection.target(), queueName);
  if (queue === undefined) return { queue: queueName, removed: 0, left: [] };
  const { sqs } = await connection.clients();
  const ops = dlqMessages();
  const group = messageGroupId(job.workspaceId);
  let removed = 0;
  const left: LeftOnDlq[] = [];
  await ops.sweepDlq(sqs, queue, {
    inScope: (m) => (queue.fifo ? m.groupId === group : ops.messageJob(m).jobId === job.jobId),
    take: async (m) => {
      if (ops.messageJob(m).jobId !== job.jobId || isConflict(m)) return false;
      const mismatch = ops.copyMismatch(queue, m, job);
      if (mismatch !== undefined) {
        left.push({
          queue: queue.name,
          jobId: job.jobId,
          why: `not this job's copy: ${mismatch} (message ${m.messageId})`,
        });
        return false;
      }
      removed += 1;
      return true;
    },
  });
  return { queue: queue.name, removed, left };
}

/** The longest reason (and name) a dismissal keeps: a note for people, not a document (the ledger item stays small). */
const DISMISSAL_TEXT_LIMIT = 500;

export interface Dismissal extends RemovedCopies {
  readonly job: JobRecord;
  /** Dismissed before (a retry): the first dismissal is kept; any copy left by an interruption is removed now. */
  readonly alreadyDismissed: boolean;
  /** The job's workspace when this job blocks it: the fence stays until "workspace unblock" decides about the skipped jobs. */
  readonly blockedWorkspace?: WorkspaceRecord;
}

/**
 * Records a FAILED job as dealt with (who, why, when) and removes its DLQ copy: it never runs
 * again, and what the DLQ alarm counts no longer includes it. Running it again is safe (the first
 * dismissal stands, a copy left by an interruption is removed). The fence its failure put on its
 * workspace stays: lifting it means replaying or dropping the skipped jobs, which is
 * "workspace unblock"'s decision, not this one's (decisions §31).
 */
export async function dismissJob(
  connection: Connection,
  jobId: string,
  dismissal: Omit<JobDismissal, 'at'>,
  now = Date.now(),
): Promise<Dismissal> {
  requireValidId('jobId', jobId);
  const reason = dismissal.reason.trim();
  const by = dismissal.by.trim();
  if (reason === '')
    throw new InvalidRequestError(
      'a dismissal needs a reason: say why the job needs no redrive (it is kept in the ledger)',
    );
  if (reason.length > DISMISSAL_TEXT_LIMIT || by.length > DISMISSAL_TEXT_LIMIT || by === '') {
    throw new InvalidRequestError(
      `a dismissal's reason and who made it are 1 to ${DISMISSAL_TEXT_LIMIT} characters each`,
    );
  }
  const ledger = await connection.ledger();
  const outcome = await ledger.dismiss({ jobId, dismissal: { by, reason, at: new Date(now).toISOString() }, now });
  const { record } = outcome;
  if (record === undefined)
    throw new NotFoundError(
      `job ${jobId} is not in the ledger of ${(await connection.target()).label}: nothing to dismiss`,
    );
  if (outcome.kind === 'refused') throw new OutcomeError(dismissRefusalWords(record));
  const copies = await removeDlqCopies(connection, record);
  const workspace = await ledger.getWorkspace(record.workspaceId);
  const blocks = workspace?.state === 'BLOCKED' && workspace.blockedBy === jobId;
  return {
    job: record,
    alreadyDismissed: outcome.kind === 'already',
    ...copies,
    ...(blocks && { blockedWorkspace: workspace }),
  };
}

/** Why a job cannot be dismissed, and what applies to it instead. */
function dismissRefusalWords(job: JobRecord): string {
  const why = dismissRefusal(job) ?? `job ${job.jobId} is ${job.status}`;
  if (job.status === 'SKIPPED')
    return `${why}: dismiss is for a failed job; "cancel ${job.jobId}" takes a skipped one off the DLQ (or "workspace unblock ${job.workspaceId} --drop" all of its workspace's)`;
  if (job.status === 'FAILED') return why;
  return `${why}: nothing of it waits on a DLQ`;
}
