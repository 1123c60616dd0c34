/**
 * Ledger rules, pure: what an existing job or workspace record means for a delivery. The DynamoDB
 * adapter (src/adapters/dynamodb-ledger.ts) turns `isClaimable` / `canTakeWorkspace` into
 * condition expressions and, when a condition fails, reads the record and asks `claimOutcome` /
 * `workspaceTakeOutcome` what to do. Keeping both sides here lets unit tests pin every case.
 */
import { repositoryIdentity } from '../../contract/git-remotes';
import { commandStageOf, JOB_TYPES, SEQUENCER, type JobType, type JobTypeDeclaration } from '../../contract/job-types';
import type {
  ClaimOutcome,
  ClaimRequest,
  CompleteInput,
  ConflictAttempt,
  ConflictSeenBy,
  Consumer,
  JobRecord,
  JobStatus,
  WorkspaceRecord,
  WorkspaceRepo,
  WorkspaceTakeOutcome,
} from './ports';
import type { JobEnvelope } from './envelope';

/**
 * Finished statuses only the operator's redrive takes over (decisions §2, §26). The job then runs
 * again from the start: the claim drops the progress of the failed run (e.g. a broken build's id)
 * and adds one to its run number, so the operator's redrive starts a new build instead of resuming it.
 */
export const RERUN_STATUSES: readonly JobStatus[] = ['SKIPPED', 'FAILED'];

/** Statuses a claim takes over whatever the lease says: a stage consumer takes the FORWARDED record the sequencer left. */
export function takeoverStatuses(consumer: Consumer): JobStatus[] {
  return consumer === 'stage' ? ['FORWARDED'] : [];
}

/**
 * Whether the delivery is the operator's redrive of this finished record: the record is FAILED or
 * SKIPPED and holds the token the delivery carries, which the operator's redrive wrote before it
 * sent the message (authorizeRedrive). The attribute alone is anyone's to set.
 */
export function isAuthorizedRerun(
  existing: Pick<JobRecord, 'status' | 'redriveToken'>,
  req: Pick<ClaimRequest, 'redriveToken'>,
): boolean {
  return (
    RERUN_STATUSES.includes(existing.status) &&
    req.redriveToken !== undefined &&
    existing.redriveToken === req.redriveToken
  );
}

export function isLeaseLive(record: Pick<JobRecord, 'leaseUntil'>, now: number): boolean {
  return record.leaseUntil !== undefined && record.leaseUntil > now;
}

/**
 * Why a stage consumer's claim does not match what the sequencer pinned, or undefined when the
 * record holds this request (digest) pinned to this very pin. The adapter encodes the same rule as
 * conditions on `digest` and `pin.*`.
 */
export function unpinnedReason(existing: JobRecord | undefined, req: ClaimRequest): string | undefined {
  const { jobId } = req.job;
  if (req.pin === undefined) return `the stage message of job ${jobId} carries no pin`;
  if (existing === undefined) return `no record of job ${jobId}: the sequencer never pinned it`;
  if (existing.pin === undefined) return `job ${jobId} was not pinned by the sequencer`;
  if (existing.digest !== req.digest)
    return `the request of job ${jobId} differs from the request the sequencer pinned`;
  for (const field of ['sha', 'repoUrl', 'branch'] as const) {
    if (existing.pin[field] !== req.pin[field])
      return `pin.${field} differs from what the sequencer pinned for job ${jobId}`;
  }
  return undefined;
}

/**
 * A pinned job belongs to its stage from FORWARDED on: the sequencer never claims it again. Were it
 * to take over a stage lease that ran out (a dead stage worker, a platform restart), it would pin
 * the job a second time at whatever the workspace head is by then, or fence the workspace.
 */
function isStagesJob(existing: JobRecord, req: ClaimRequest): boolean {
  return req.consumer === 'sequencer' && existing.pin !== undefined;
}

/** The rule the claim's condition expression encodes; only the same request may take a record over. */
export function isClaimable(existing: JobRecord | undefined, req: ClaimRequest): boolean {
  if (req.consumer === 'stage' && unpinnedReason(existing, req) !== undefined) return false;
  if (existing === undefined) return true;
  if (existing.digest !== req.digest) return false;
  if (isStagesJob(existing, req)) return false;
  // Recorded by the producer before sending: the job's turn has come.
  if (existing.status === 'QUEUED') return true;
  if (existing.status === 'IN_FLIGHT') return !isLeaseLive(existing, req.now);
  return takeoverStatuses(req.consumer).includes(existing.status) || isAuthorizedRerun(existing, req);
}

/** What a record that refused the claim means (read with a consistent read after the failed write). */
export function claimOutcome(existing: JobRecord | undefined, req: ClaimRequest): ClaimOutcome {
  if (isClaimable(existing, req)) return { kind: 'retry' };
  // A tombstone left by `cancel` before the job was ever seen carries no digest: cancel wins.
  if (existing?.status === 'CANCELLED') return { kind: 'cancelled', record: existing };
  const unpinned = req.consumer === 'stage' ? unpinnedReason(existing, req) : undefined;
  if (unpinned !== undefined) return { kind: 'unpinned', why: unpinned };
  if (existing === undefined) return { kind: 'retry' };
  if (existing.digest !== req.digest) return { kind: 'conflict', record: existing };
  if (isStagesJob(existing, req)) {
    // Not taken by a stage consumer yet, or taken by one whose lease ran out (it died, or its
    // message was lost with a restarted local platform): forward it again, with its recorded pin.
    const orphaned = existing.status === 'IN_FLIGHT' && !isLeaseLive(existing, req.now);
    if (existing.status === 'FORWARDED' || orphaned) return { kind: 'forwarded', record: existing };
    // A stage consumer runs it or has finished it: the verdict is the stage's (and on the stage's DLQ).
    return { kind: 'staged', record: existing };
  }
  // Our own lease: this very claim's write applied and its answer was lost (the SDK retried it).
  if (existing.status === 'IN_FLIGHT' && existing.leaseOwner === req.owner)
    return { kind: 'claimed', record: existing };
  switch (existing.status) {
    case 'SUCCEEDED':
      return { kind: 'duplicate', record: existing };
    case 'FAILED':
    case 'SKIPPED':
      return { kind: 'finished', record: existing };
    case 'FORWARDED':
      return { kind: 'forwarded', record: existing };
    case 'IN_FLIGHT':
      return { kind: 'busy', record: existing };
    case 'QUEUED':
      return { kind: 'retry' }; // claimable (above): the write raced with another writer
    case 'RUNNING':
      return { kind: 'running', record: existing };
  }
}

/** Oldest job first (createdAt, then jobId for a stable order): how unfinished jobs are listed for re-sending. */
export function byCreation(a: JobRecord, b: JobRecord): number {
  return a.createdAt < b.createdAt
    ? -1
    : a.createdAt > b.createdAt
      ? 1
      : a.jobId < b.jobId
        ? -1
        : a.jobId > b.jobId
          ? 1
          : 0;
}

/**
 * Why `dismiss` does not apply to a record, or undefined when it does: a FAILED job whose failure
 * was reported (a command stage's verdict is reported, its DLQ copy sent, when it leaves the due
 * index: a dismissal before that would be followed by the copy). The adapter's condition says the same.
 */
export function dismissRefusal(record: Pick<JobRecord, 'jobId' | 'status' | 'dueAt'>): string | undefined {
  if (record.status !== 'FAILED') return `job ${record.jobId} is ${record.status}`;
  if (record.dueAt !== undefined)
    return `job ${record.jobId} has just failed and its failure is being reported (its DLQ copy is on its way): dismiss it in a minute`;
  return undefined;
}

/** Whether a job's DLQ copy, if one is left, is nobody's to act on: the job was cancelled or its failure dismissed. */
export function isOffTheDlq(record: Pick<JobRecord, 'status' | 'dismissed'>): boolean {
  return record.status === 'CANCELLED' || record.dismissed !== undefined;
}

/**
 * Whether a job itself waits on a DLQ, for an operator to replay, redrive or dismiss: FAILED (its
 * failure not dismissed) or SKIPPED. The ledger's DLQ list holds it. (Only a FAILED job can be
 * dismissed, dismissRefusal, so a dismissal here is always a failure's.)
 */
export function waitsOnDlq(record: Pick<JobRecord, 'status' | 'dismissed'>): boolean {
  return (record.status === 'FAILED' || record.status === 'SKIPPED') && record.dismissed === undefined;
}

/** Statuses `cancel` turns into CANCELLED: the job has not started and will not start. */
export const CANCELLABLE_STATUSES: readonly JobStatus[] = ['QUEUED', 'FORWARDED', 'SKIPPED'];

/**
 * What `cancel` does to a job as its record stands (decisions §33):
 * - `notStarted`: QUEUED, FORWARDED or SKIPPED; it never runs.
 * - `stopBuild`: a command stage's job its stage has taken: RUNNING (its build recorded), or
 *   IN_FLIGHT with its build recorded, or with no worker holding it (its lease ran out: a retry or
 *   a wait for a build slot, when no build is being started). It becomes CANCELLED and stays due,
 *   so the build reconciler stops `buildId` (if one was recorded); a completion or a stage's write
 *   that comes after is fenced on RUNNING / IN_FLIGHT and changes nothing.
 * - `refused`: finished, a command stage whose worker is starting its build right now (no build id
 *   yet: the cancel could not name the build to stop), a job the sequencer holds, or an apply_patch,
 *   open_pr or any other job that is not a command stage, once started: their effect (a push, a
 *   pull request) is one step on another system that cannot be taken back halfway.
 */
export type CancelRule =
  | { readonly kind: 'notStarted' }
  | { readonly kind: 'stopBuild'; readonly buildId?: string }
  | { readonly kind: 'refused'; readonly why: string };

export function cancelRule(
  record: Pick<JobRecord, 'status' | 'type' | 'attempt' | 'pin' | 'progress' | 'leaseUntil'>,
  now: number,
): CancelRule {
  if (CANCELLABLE_STATUSES.includes(record.status)) return { kind: 'notStarted' };
  const buildId = record.progress?.['buildId'];
  const stagesCommand = commandStageOf(record.type) !== undefined && record.pin !== undefined;
  if (stagesCommand && record.status === 'RUNNING')
    return buildId === undefined ? { kind: 'stopBuild' } : { kind: 'stopBuild', buildId };
  if (record.status !== 'IN_FLIGHT') return { kind: 'refused', why: `${record.status} already` };
  if (stagesCommand && buildId !== undefined) return { kind: 'stopBuild', buildId };
  if (stagesCommand && !isLeaseLive(record, now)) return { kind: 'stopBuild' };
  if (stagesCommand)
    return {
      kind: 'refused',
      why: `starting its build (attempt ${record.attempt}): cancel again in a moment, once the build is recorded`,
    };
  if (record.pin === undefined && JOB_TYPES[record.type].lane === 'staged')
    return { kind: 'refused', why: 'being pinned by the sequencer: cancel again in a moment' };
  // A push or a pull request is one request to the git host: stopped halfway it would still have happened, or not.
  return {
    kind: 'refused',
    why: `running (attempt ${record.attempt}): a started ${record.type} runs to its end (only a command stage's build can be stopped)`,
  };
}

/** Distinct conflicting requests recorded per job id: enough to see the pattern, bounded in size. */
export const MAX_CONFLICTS = 20;

/**
 * The ledger's lists (the sparse `byList` index, LEDGER_TABLE.listIndex): every workspace, the
 * jobs of a workspace that are not finished (or were cancelled before their turn), and what waits
 * on a dead-letter queue. A record belongs to at most one list; only writes that change its list
 * touch the index.
 */
export const LISTS = {
  workspaces: 'workspace',
  dlq: 'dlq',
  /** One partition per workspace, so a busy platform does not write one hot index partition. */
  open: (workspaceId: string) => `open#${workspaceId}`,
} as const;

/** Sort key within a list: time first (ISO-8601 sorts), then the id, so entries are unique and in order. */
export function listSortKey(at: string, id: string): string {
  return `${at}#${id}`;
}

/** The queue whose DLQ holds a failed or skipped job: its stage's once pinned (the stage ran it), else the FIFO queue's. */
export function dlqQueueOf(record: Pick<JobRecord, 'type' | 'pin'>): string {
  return record.pin === undefined ? SEQUENCER.queue : stageQueueOf(record.type);
}

/** The queue whose DLQ holds a refused conflicting send; undefined when it was refused before it was sent. */
export function conflictQueueOf(type: JobType, seenBy: ConflictSeenBy): string | undefined {
  if (seenBy === 'enqueue') return undefined;
  return seenBy === 'sequencer' ? SEQUENCER.queue : stageQueueOf(type);
}

function stageQueueOf(type: JobType): string {
  const declaration: JobTypeDeclaration = JOB_TYPES[type];
  return declaration.stage?.queue ?? SEQUENCER.queue;
}

/**
 * Whether `record` is what `input`'s completion wrote: its status, by this lease owner, at this
 * instant. A takeover changes the owner, and no other write sets this status with this owner and
 * time, so a completion whose answer was lost is recognised without being confused with another's.
 */
export function isCompletionOf(record: JobRecord, input: CompleteInput): boolean {
  return (
    record.status === input.verdict.status &&
    record.leaseOwner === input.owner &&
    record.updatedAt === new Date(input.now).toISOString()
  );
}

/** The record of a job the moment it is sent (every ledger writes this same record, its list aside). */
export function queuedRecord(job: JobEnvelope, digest: string, now: number, retentionDays: number): JobRecord {
  return {
    jobId: job.jobId,
    workspaceId: job.workspaceId,
    tenantId: job.tenantId,
    type: job.type,
    status: 'QUEUED',
    digest,
    attempt: 0,
    createdAt: job.createdAt,
    updatedAt: new Date(now).toISOString(),
    ttl: ttlFor(now, retentionDays),
  };
}

/**
 * One refused conflicting request: the attempt to list, and its token. One entry per distinct
 * request and place: the same conflicting request refused at the door and later found on a DLQ
 * (sent without the CLI) is listed twice, once per place.
 */
export function conflictEntry(
  job: JobEnvelope,
  digest: string,
  seenBy: ConflictSeenBy,
  now: number,
): { attempt: ConflictAttempt; token: string; queue: string | undefined } {
  const queue = conflictQueueOf(job.type, seenBy);
  const attempt: ConflictAttempt = {
    jobId: job.jobId,
    workspaceId: job.workspaceId,
    tenantId: job.tenantId,
    type: job.type,
    at: new Date(now).toISOString(),
    seenBy,
  };
  return { attempt, token: `${digest}:${queue ?? 'refused'}`, queue };
}

/** DynamoDB TTL (epoch seconds): longer than the DLQ retention, so a replay still finds its record. */
export function ttlFor(now: number, retentionDays: number): number {
  return Math.floor(now / 1000) + retentionDays * 86_400;
}

/** Whether a job naming `repo` (an ordered job; staged jobs name none) fits the workspace's binding. */
export function matchesBinding(ws: WorkspaceRecord | undefined, repo: WorkspaceRepo | undefined): boolean {
  return repo === undefined || ws?.repo === undefined || (ws.repo.url === repo.url && ws.repo.branch === repo.branch);
}

/** The rule the cursor update's condition encodes (decisions §3), binding included. */
export function canTakeWorkspace(ws: WorkspaceRecord | undefined, repo?: WorkspaceRepo): boolean {
  if (!matchesBinding(ws, repo)) return false;
  return ws === undefined || (ws.state === 'ACTIVE' && ws.currentDone !== false);
}

/**
 * Why the cursor refused a job, from a consistent read of the workspace record. A job naming
 * another repository or branch can never run here, so that comes first, whatever the state.
 */
export function workspaceTakeOutcome(
  ws: WorkspaceRecord | undefined,
  jobId: string,
  repo?: WorkspaceRepo,
): WorkspaceTakeOutcome {
  if (ws === undefined || canTakeWorkspace(ws, repo)) return { kind: 'retry' };
  if (!matchesBinding(ws, repo)) return { kind: 'mismatch', workspace: ws };
  if (ws.state === 'BLOCKED') return { kind: 'blocked', workspace: ws };
  // A redelivery of the job that holds the cursor (it crashed or timed out mid-run): run it again.
  if (ws.currentJobId === jobId || ws.currentJobId === undefined) return { kind: 'taken', workspace: ws };
  return { kind: 'predecessorUnfinished', workspace: ws, predecessor: ws.currentJobId };
}

/**
 * The ledger key of a repository branch's binding (`pk = branch#...`): one per repository as
 * repositoryIdentity spells it, and per branch in any letter case (a host on a case-insensitive
 * file system keeps `Agent/WS1` and `agent/ws1` in one ref file). Branch names hold no `#`.
 */
export function branchBindingKey(repo: WorkspaceRepo): string {
  return `branch#${repositoryIdentity(repo.url)}#${repo.branch.toLowerCase()}`;
}

/**
 * Whether a branch binding may pass to another workspace: its holder is bound to another branch
 * (the job that claimed this one never bound its workspace: it crashed, or its message was lost,
 * and a later job bound the workspace elsewhere). A holder with no binding yet may be a first job
 * between its claim and its turn: the claim stands.
 */
export function isStaleBinding(holder: WorkspaceRecord | undefined, repo: WorkspaceRepo): boolean {
  return holder?.repo !== undefined && branchBindingKey(holder.repo) !== branchBindingKey(repo);
}
