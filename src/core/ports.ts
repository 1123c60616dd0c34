/**
 * Every port of the core in one file: the ledger's records and interface, and the small interfaces
 * the processors use to reach the outside world. Adapters (src/adapters) implement them for AWS and
 * for the local platform; src/compose builds them; tests hand in emulator-backed adapters or, for
 * fault injection only, wrappers and mocks.
 */
import type { SQSRecord } from 'aws-lambda';
import type { EventType, JobMetricName } from '../../contract/runtime-env';
import type { CommandJobType, JobType } from '../../contract/job-types';
import type { JobEnvelope, Pin, StageMessage } from './envelope';
import type { GateCheck, PatchMismatch } from './errors';

/**
 * QUEUED: sent, its turn has not come (recorded by the producer when it has the ledger).
 * RUNNING: a command stage started the job's build and acknowledged its message; the build's
 * completion (an event, or the reconciler) records the verdict.
 */
export type JobStatus =
  'QUEUED' | 'IN_FLIGHT' | 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'FORWARDED' | 'SKIPPED' | 'CANCELLED';
/** Statuses after which a job never runs again on an ordinary redelivery. */
export const TERMINAL_STATUSES: readonly JobStatus[] = ['SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED'];
/** Statuses of a job that was sent but has no outcome yet: a lost message leaves a job here. */
export const UNFINISHED_STATUSES: readonly JobStatus[] = ['QUEUED', 'IN_FLIGHT', 'FORWARDED'];
/** Outcomes announced by an event (a cancellation is the operator's own act: none). */
export const FINISHED_WITH_EVENT: readonly JobStatus[] = ['SUCCEEDED', 'FAILED', 'SKIPPED'];

/** The error reason of a job skipped behind a blocked workspace (its message names the blocking job). */
export const SKIPPED_REASON = 'SKIPPED';

export interface JobFailure {
  /** PermanentReason code, or SKIPPED / CANCELLED causes. */
  readonly reason: string;
  readonly message: string;
  /**
   * PATCH_DOES_NOT_APPLY: what the patch met, recorded when it failed (bounded), so that an agent
   * or an operator reads it on every surface without taking the message off a DLQ.
   */
  readonly repositoryData?: PatchMismatch;
  /** REQUIREMENT_FAILED: the required job that did not pass, its verdict and the commit. */
  readonly gate?: readonly GateCheck[];
}

/** `pk = job#<jobId>` */
export interface JobRecord {
  readonly jobId: string;
  readonly workspaceId: string;
  readonly tenantId: string;
  readonly type: JobType;
  readonly status: JobStatus;
  /** sha256 of the canonical request (see jobDigest). */
  readonly digest: string;
  readonly leaseOwner?: string;
  /** Epoch milliseconds. */
  readonly leaseUntil?: number;
  /**
   * How many times the job's worker started it: 1 for a job that ran once; a retry after a
   * transient failure or a crash, or an operator's redrive, adds one. Pinning and forwarding a
   * staged job is not an attempt at it (its stage starts again from 0), and a duplicate delivery
   * of a finished job is not either. 0 while QUEUED.
   */
  readonly attempt: number;
  readonly result?: Record<string, unknown>;
  readonly error?: JobFailure;
  /** Staged jobs: the commit the sequencer pinned them to. */
  readonly pin?: Pin;
  /** Position in the workspace's order (the sequencer's cursor when it took the job). */
  readonly wsSeq?: number;
  /** The turns it had before wsSeq: skipped or failed there, then run again (a replay, a redrive) at a later turn. */
  readonly earlierSeqs?: readonly number[];
  /** SKIPPED jobs: the job that blocked the workspace. */
  readonly blockedBy?: string;
  /** Progress recorded before a side effect (a command stage's build id), so a redelivery finds it. */
  readonly progress?: Record<string, string>;
  /** Command stages: the run number, 0 for the first run; only an operator's redrive adds one. */
  readonly run?: number;
  /** FAILED / SKIPPED: the operator's redrive on its way (authorizeRedrive); the claim it wins removes it. */
  readonly redriveToken?: string;
  /** FAILED: an operator recorded the failure as dealt with (`dlq dismiss`); it left the DLQ and never runs again. */
  readonly dismissed?: JobDismissal;
  /**
   * Command stages, while the reconciler must look at the job (epoch ms): a RUNNING job's build
   * timeout plus margins, or a verdict's report deadline. Absent once the outcome is reported.
   */
  readonly dueAt?: number;
  /** Command stages: the stage message, kept for the DLQ copy when the build fails. */
  readonly stageMessage?: string;
  /** Command stages: when the completion path reported the outcome (event, DLQ copy). */
  readonly reportedAt?: string;
  readonly createdAt: string;
  /** When its worker last claimed it (ISO-8601): its current attempt's start, so a duration is of the work, not from the first send. */
  readonly startedAt?: string;
  readonly updatedAt: string;
  /** Epoch seconds (DynamoDB TTL). */
  readonly ttl: number;
}

/** Who recorded a failed job as dealt with, why, and when (ISO-8601). */
export interface JobDismissal {
  readonly by: string;
  readonly reason: string;
  readonly at: string;
}

export type WorkspaceState = 'ACTIVE' | 'BLOCKED';

/** The repository and branch a workspace is bound to by its first job. */
export interface WorkspaceRepo {
  readonly url: string;
  readonly branch: string;
}

/**
 * `pk = branch#<repository identity>#<branch>` (src/core/ledger.ts branchBindingKey): the one
 * workspace a repository branch belongs to, claimed by the first ordered job that names it.
 */
export type BranchBinding =
  | { readonly kind: 'bound' }
  /** Another workspace holds the branch (`jobId`: the job that claimed it). */
  | { readonly kind: 'taken'; readonly holder: { readonly workspaceId: string; readonly jobId: string } };

export interface BindBranchInput {
  readonly repo: WorkspaceRepo;
  readonly workspaceId: string;
  readonly jobId: string;
  readonly now: number;
}

/** `pk = ws#<workspaceId>` */
export interface WorkspaceRecord {
  readonly workspaceId: string;
  readonly repo?: WorkspaceRepo;
  /** Commit sha after the last applied patch. */
  readonly head?: string;
  readonly state: WorkspaceState;
  readonly blockedBy?: string;
  readonly blockedReason?: string;
  /** The job the sequencer took last for this workspace, and whether it finished. */
  readonly currentJobId?: string;
  readonly currentDone?: boolean;
  /** Sequence number of the last job taken (the cursor). */
  readonly seq: number;
  readonly updatedAt: string;
}

/** Publishes AgentJobSucceeded / AgentJobFailed / AgentJobSkipped / WorkspaceBlocked. */
export interface EventPublisher {
  publish(type: EventType, detail: Record<string, unknown>): Promise<void>;
}

/** Claim-checked diffs (S3 on AWS, fauxqs' S3 locally): bytes in, the same bytes out. */
export interface DiffStore {
  put(key: string, body: Uint8Array): Promise<{ bucket: string; key: string; sha256: string; bytes: number }>;
  get(ref: { bucket: string; key: string; sha256: string; bytes: number }): Promise<Uint8Array>;
}

/** What a consumer of claim-checked diffs needs (the sequencer only reads them). */
export type DiffReader = Pick<DiffStore, 'get'>;

/** One run of a command stage's command at the job's pinned commit. */
export interface CommandRun {
  readonly job: StageMessage<CommandJobType>;
  /** The job's run number (JobRecord.run): a redrive's new run starts a new build. */
  readonly run: number;
  /**
   * Names this run apart from every other job's under the same id and run number (one sent again
   * once the ledger no longer knew the first): a runner never matches it to an earlier job's build.
   */
  readonly key: string;
  /** The shell line: the job's command or its stage's default. */
  readonly command: string;
  readonly timeoutSeconds: number;
}

/**
 * Runs command stages' commands (tests, lint, ...) at a pinned commit: CodeBuild on AWS, a child
 * process locally. Nobody waits on a build: its end comes back as a BuildCompletion through the
 * build-events queue, and `describe` answers the reconciler.
 */
export interface TestRunner {
  /** Starts the build of a run; the same job and run never start a second build. */
  start(run: CommandRun): Promise<{ buildId: string }>;
  /** Current state of builds, in one request; an id the runner does not know is absent from the map. */
  describe(buildIds: readonly string[]): Promise<Map<string, TestRunStatus>>;
}

/** A runner that stops the build of a cancelled job (the reconciler's; decisions §33). */
export interface BuildStopper {
  /**
   * Stops the build and everything it started; a build that has ended, or that the runner does
   * not know, is left as it is. Its completion (STOPPED) comes as any other, and changes nothing.
   */
  stop(buildId: string): Promise<void>;
}

export type TestRunStatus =
  | { readonly state: 'RUNNING' }
  | {
      readonly state: 'PASSED' | 'FAILED';
      readonly exitCode: number | null;
      readonly logTail: string;
      readonly durationMs?: number;
    }
  /** Infrastructure errors (FAULT, TIMED_OUT, STOPPED): not a verdict of the command. */
  | { readonly state: 'ERROR'; readonly status: string; readonly message: string };

export type FinishedRunStatus = Exclude<TestRunStatus, { state: 'RUNNING' }>;

/** A runner that can find the build an earlier attempt started for a run but never recorded (a crash in between). */
export interface BuildFinder {
  findBuild(run: Pick<CommandRun, 'job' | 'run' | 'key'>): Promise<string | undefined>;
}

/** A build that ended, as its completion event (or the reconciler) tells it. */
export interface BuildCompletion {
  readonly buildId: string;
  /** The job the build ran for, its type and commit: what the stage gave the build (JOB_ID, JOB_TYPE, COMMIT_SHA). */
  readonly jobId: string;
  readonly jobType: string;
  readonly sha: string;
  readonly status: FinishedRunStatus;
}

/** Pull-request host (GitHub through Octokit on AWS, a local store locally). */
export interface PullRequestHost {
  /** Finds the open PR whose head is `branch`, or creates it. Idempotent by head branch. */
  findOrCreate(input: {
    repoUrl: string;
    head: string;
    base: string;
    title: string;
    body?: string;
  }): Promise<{ number: number; url: string; created: boolean }>;
}

/** What apply_patch asks of the workspace's repository. */
export interface PatchCommitRequest {
  readonly repoUrl: string;
  readonly branch: string;
  /** A `git diff`: its bytes (any encoding), or UTF-8 text. */
  readonly diff: string | Uint8Array;
  /** The commit the diff was made against; the branch head must still be there. */
  readonly baseSha?: string;
  readonly jobId: string;
  readonly message: string;
  readonly author?: { readonly name: string; readonly email: string };
  /** ISO-8601: the author and committer time of the commit. */
  readonly createdAt: string;
}

export interface PatchCommitResult {
  readonly commitSha: string;
  readonly parentSha: string;
  /** The job's commit was already on the branch (a redelivery, or a twin worker won the push). */
  readonly alreadyApplied: boolean;
}

/**
 * The workspace remotes (isomorphic-git over smart HTTP on AWS and locally). The adapter brings the
 * credentials and the scratch space; tests wrap it to inject faults.
 */
export interface WorkspaceGit {
  /** One commit carrying the job's trailer, pushed fast-forward only; finds it again on redelivery. */
  commitPatch(request: PatchCommitRequest): Promise<PatchCommitResult>;
  /** The branch's head commit, or undefined when the branch does not exist. */
  branchHead(repoUrl: string, branch: string): Promise<string | undefined>;
}

/** Who claims: the sequencer (FIFO lane) or a stage consumer (a forwarded, pinned job). */
export type Consumer = 'sequencer' | 'stage';

export interface ClaimRequest {
  readonly job: JobEnvelope;
  readonly digest: string;
  /** Unique per delivery attempt, so a paused worker cannot complete after a takeover. */
  readonly owner: string;
  /** Epoch milliseconds. */
  readonly now: number;
  readonly leaseMs: number;
  readonly consumer: Consumer;
  /**
   * A stage consumer's claim carries the pin of its message: it wins only when the ledger holds a
   * record the sequencer pinned with the same digest and the same pin (a claim without one never
   * does). A stage runs what the sequencer pinned, never what a message says.
   */
  readonly pin?: Pin;
  /**
   * The `redrive` attribute of the delivery. It takes over a FAILED or SKIPPED record only when the
   * ledger holds the same token: the operator's redrive records it there first (authorizeRedrive),
   * so a message that merely carries the attribute is an ordinary redelivery.
   */
  readonly redriveToken?: string;
}

export type ClaimOutcome =
  /** This worker holds the lease and runs the job. */
  | { readonly kind: 'claimed'; readonly record: JobRecord }
  /** SUCCEEDED with the same digest: acknowledge with the stored result. */
  | { readonly kind: 'duplicate'; readonly record: JobRecord }
  /** Same jobId, different request: permanent failure; the original record is kept. */
  | { readonly kind: 'conflict'; readonly record: JobRecord }
  /** A live lease held by another owner: retry later, never run twice at once. */
  | { readonly kind: 'busy'; readonly record: JobRecord }
  /** Cancelled by an operator before it ran: acknowledge as a no-op. */
  | { readonly kind: 'cancelled'; readonly record: JobRecord }
  /** FAILED / SKIPPED on an ordinary redelivery: nothing runs again; its outcome is reported again. */
  | { readonly kind: 'finished'; readonly record: JobRecord }
  /** The sequencer meets a job its stage consumer has taken (running or done): the stage reports it. */
  | { readonly kind: 'staged'; readonly record: JobRecord }
  /** A command stage's build is running: acknowledged, the build's completion reports the job. */
  | { readonly kind: 'running'; readonly record: JobRecord }
  /**
   * The sequencer meets a job it already pinned and forwarded, not taken by a stage consumer yet or
   * taken by one whose lease ran out: re-send it with the recorded pin.
   */
  | { readonly kind: 'forwarded'; readonly record: JobRecord }
  /** A stage message the sequencer never pinned (forged, or altered): refused, no record touched. */
  | { readonly kind: 'unpinned'; readonly why: string }
  /** The record changed between the failed write and the read (e.g. the lease just expired). */
  | { readonly kind: 'retry' };

export type WorkspaceTakeOutcome =
  /** The cursor moved to this job (or already pointed at it after a redelivery). */
  | { readonly kind: 'taken'; readonly workspace: WorkspaceRecord }
  /** BLOCKED: the job is skipped. */
  | { readonly kind: 'blocked'; readonly workspace: WorkspaceRecord }
  /** The job names another repository or branch than the workspace is bound to: refused, cursor untouched. */
  | { readonly kind: 'mismatch'; readonly workspace: WorkspaceRecord }
  /** The previous job left the queue without a verdict: fence the workspace, skip this job. */
  | { readonly kind: 'predecessorUnfinished'; readonly workspace: WorkspaceRecord; readonly predecessor: string }
  | { readonly kind: 'retry' };

/** How a claimed job ends; `complete` writes it fenced on the lease owner. */
export type JobVerdict =
  | { readonly status: 'SUCCEEDED'; readonly result: Record<string, unknown> }
  | { readonly status: 'FAILED'; readonly error: JobFailure }
  | { readonly status: 'SKIPPED'; readonly blockedBy: string; readonly error: JobFailure }
  | { readonly status: 'FORWARDED'; readonly pin: Pin }
  /** The build started (its id is in `progress`); the completion path records the verdict. */
  | { readonly status: 'RUNNING'; readonly dueAt: number; readonly stageMessage: string };

export interface CompleteInput {
  readonly jobId: string;
  readonly owner: string;
  readonly now: number;
  readonly verdict: JobVerdict;
  /**
   * Position in the workspace's order: indexes the job under `byWorkspace`. `previousSeq`: the turn
   * the record held before this one (a job run again), added to `earlierSeqs`.
   */
  readonly workspace?: { readonly workspaceId: string; readonly seq: number; readonly previousSeq?: number };
}

export interface FinishBuildInput {
  readonly jobId: string;
  readonly buildId: string;
  readonly verdict: Extract<JobVerdict, { status: 'SUCCEEDED' | 'FAILED' }>;
  readonly now: number;
  /** When the reconciler reports the outcome if nobody has (epoch ms). */
  readonly reportBy: number;
}

export type FinishBuildOutcome =
  | { readonly kind: 'finished'; readonly record: JobRecord }
  /** Not RUNNING with that build: the record as read (absent when the job is unknown). */
  | { readonly kind: 'refused'; readonly record: JobRecord | undefined };

export interface TakeWorkspaceInput {
  readonly workspaceId: string;
  readonly jobId: string;
  /** apply_patch names the workspace's repository: the first one recorded binds it, another is a mismatch. */
  readonly repo?: WorkspaceRepo;
  readonly now: number;
}

/** Outcomes after the adapter retried races away. */
export type SettledClaim = Exclude<ClaimOutcome, { kind: 'retry' }>;
export type SettledTake = Exclude<WorkspaceTakeOutcome, { kind: 'retry' }>;

export type CancelOutcome =
  /**
   * The job was QUEUED, FORWARDED (waiting for its stage) or SKIPPED: it will never run now; or a
   * command stage's job its stage had taken (cancelRule `stopBuild`): its build, named in the
   * record's progress, is stopped by the build reconciler.
   */
  | { readonly cancelled: true; readonly previous: JobStatus; readonly record: JobRecord }
  /** Running or finished (record), or unknown to the ledger (no record): nothing changed. */
  | { readonly cancelled: false; readonly record?: JobRecord };

export type DismissOutcome =
  /** FAILED, not dismissed before: dismissed now, off the DLQ list, any redrive on its way revoked. */
  | { readonly kind: 'dismissed'; readonly record: JobRecord }
  /** Dismissed before: the first dismissal is kept (a retry changes nothing). */
  | { readonly kind: 'already'; readonly record: JobRecord }
  /** Not FAILED, or its failure not reported yet (dismissRefusal says why), or unknown (no record). */
  | { readonly kind: 'refused'; readonly record?: JobRecord };

/** What the ledger answers a producer that records a job before sending it. */
export type QueueOutcome =
  /** Recorded QUEUED now: the first send of this job id. */
  | { readonly kind: 'queued'; readonly record: JobRecord }
  /** The job id is known already: a resend (same digest), a conflict (another digest) or a cancelled job. */
  | { readonly kind: 'known'; readonly record: JobRecord };

/** Who refused a send that reused a job id for a different request. */
export type ConflictSeenBy = 'enqueue' | Consumer;

/** One refused request that reused a job id (`pk = conflict#<jobId>`; the job's own record is untouched). */
export interface ConflictAttempt {
  readonly jobId: string;
  readonly workspaceId: string;
  readonly tenantId: string;
  readonly type: JobType;
  /** ISO-8601: when it was first refused. */
  readonly at: string;
  /** `enqueue`: refused before sending; otherwise refused by that consumer and moved to its DLQ. */
  readonly seenBy: ConflictSeenBy;
}

export interface WorkspacePageRequest {
  /** `oldest` first (sequence numbers ascending) or `newest` first. */
  readonly order: 'oldest' | 'newest';
  /** The sequence number the page starts after, in its order (the last one of the previous page); absent: from the start. */
  readonly after?: number;
  readonly limit: number;
}

export interface WorkspacePage {
  readonly jobs: JobRecord[];
  /** Whether jobs follow this page in its order. */
  readonly more: boolean;
}

/** A job on a dead-letter queue as the ledger knows it: a FAILED or SKIPPED job, or a refused conflicting send. */
export type DlqEntry =
  | { readonly kind: 'job'; readonly record: JobRecord }
  | { readonly kind: 'conflict'; readonly attempt: ConflictAttempt };

/**
 * The ledger as the pipeline, the handlers and the CLI use it. Writes that change a job a worker
 * holds are fenced on its lease owner and throw LeaseLostError when it was taken over.
 */
export interface Ledger {
  /** One conditional write; on refusal one consistent read says why (see claimOutcome). */
  claim(req: ClaimRequest): Promise<SettledClaim>;
  complete(input: CompleteInput): Promise<JobRecord>;
  /** Extends the lease of a job this owner holds. */
  heartbeat(input: { jobId: string; owner: string; leaseUntil: number; now: number }): Promise<void>;
  /** Ends this owner's lease at once, so a retry need not wait for it to run out. */
  release(input: { jobId: string; owner: string; now: number }): Promise<void>;
  /** Records progress before a long wait (e.g. a build id) so a redelivery resumes it. */
  recordProgress(input: { jobId: string; owner: string; progress: Record<string, string>; now: number }): Promise<void>;
  getJob(jobId: string): Promise<JobRecord | undefined>;
  getWorkspace(workspaceId: string): Promise<WorkspaceRecord | undefined>;
  /** The workspace's jobs in the order the sequencer took them (byWorkspace index). */
  listWorkspaceJobs(workspaceId: string): Promise<JobRecord[]>;
  /**
   * One page of the workspace's jobs in the sequencer's order (byWorkspace index): what a page
   * costs is the page's, never the workspace's.
   */
  pageWorkspaceJobs(workspaceId: string, request: WorkspacePageRequest): Promise<WorkspacePage>;
  /**
   * Jobs delivered but not finished (UNFINISHED_STATUSES), oldest first: after a crash that lost
   * their messages, these are the ones to send again. A full read of the table: an operator's tool.
   */
  listUnfinished(): Promise<JobRecord[]>;
  /**
   * Jobs that reached an outcome with an event (SUCCEEDED, FAILED, SKIPPED) at or after `since`,
   * oldest first. A full read of the table: the local platform's check at start.
   */
  listFinishedSince(since: number): Promise<JobRecord[]>;
  /**
   * A command stage's verdict, fenced on the build id recorded for the job and on RUNNING: a late,
   * duplicate or stale build's completion changes nothing ('refused', with the record as read).
   * The record stays due until `markReported` (REPORT_GRACE_SECONDS later, the reconciler reports).
   */
  finishBuild(input: FinishBuildInput): Promise<FinishBuildOutcome>;
  /** The outcome of the build's verdict was reported (event, DLQ copy): the job leaves the due index. */
  markReported(input: { jobId: string; buildId: string; now: number }): Promise<void>;
  /** A RUNNING job whose build is still going past its due time: look again at `dueAt`. */
  postponeDue(input: { jobId: string; buildId: string; dueAt: number; now: number }): Promise<void>;
  /** Command-stage jobs due for the reconciler at `now`, oldest first. */
  listDue(now: number, limit: number): Promise<JobRecord[]>;
  /**
   * A job cancelRule allows becomes CANCELLED in one conditional write; anything else is returned as
   * is. A job cancelled while QUEUED never gets a turn, so it stays on its workspace's open list
   * (listOpenJobs), the only list that shows it. A command stage's job cancelled once taken stays
   * on the due index (dueAt = now) until the reconciler has stopped its build (markBuildStopped).
   */
  cancel(jobId: string, now: number): Promise<CancelOutcome>;
  /** The build of a CANCELLED job was stopped (or it had none to stop): the job leaves the due index. */
  markBuildStopped(input: { jobId: string; now: number }): Promise<void>;
  /**
   * The operator's redrive of a FAILED or SKIPPED job, recorded before its message is sent: the
   * record keeps `token`, which the redriven delivery must carry to run the job again. Undefined
   * (nothing written) when the job is not FAILED or SKIPPED.
   */
  authorizeRedrive(input: { jobId: string; token: string; now: number }): Promise<JobRecord | undefined>;
  /**
   * Records a FAILED job as dealt with (who, why, when): it leaves the DLQ list, a redrive on its way
   * is revoked, and none is authorized again. Refused while its failure is not reported yet (a
   * command stage's DLQ copy on its way), and for any other status.
   */
  dismiss(input: { jobId: string; dismissal: JobDismissal; now: number }): Promise<DismissOutcome>;
  /** Records a job as QUEUED before it is sent (one conditional write); a known job id is returned as is. */
  recordQueued(input: { job: JobEnvelope; digest: string; now: number }): Promise<QueueOutcome>;
  /** Records a refused request that reused a job id (once per distinct request, at most MAX_CONFLICTS). */
  recordConflict(input: { job: JobEnvelope; digest: string; seenBy: ConflictSeenBy; now: number }): Promise<void>;
  /** The refused requests that reused this job id, oldest first. */
  getConflicts(jobId: string): Promise<ConflictAttempt[]>;
  /** getConflicts of several jobs in one read (a page of a workspace's jobs): only the ids that have some. */
  getConflictsOf(jobIds: readonly string[]): Promise<Map<string, ConflictAttempt[]>>;
  /** Every workspace the ledger knows, by id. */
  listWorkspaces(): Promise<WorkspaceRecord[]>;
  /**
   * The workspace's jobs that are QUEUED, running or waiting for their stage, and those cancelled
   * while QUEUED (they never get a turn), oldest first.
   */
  listOpenJobs(workspaceId: string): Promise<JobRecord[]>;
  /** Jobs on a dead-letter queue (FAILED, SKIPPED, refused conflicting sends), oldest first. */
  listDlq(): Promise<DlqEntry[]>;
  /** Moves the cursor to a job (decisions §3). */
  takeWorkspace(input: TakeWorkspaceInput): Promise<SettledTake>;
  /** Next sequence number without moving the cursor: orders SKIPPED jobs for replay. */
  nextWorkspaceSeq(workspaceId: string, now: number): Promise<number>;
  /** The job holding the cursor finished (with the new head after an apply_patch). */
  finishWorkspaceJob(input: { workspaceId: string; jobId: string; head?: string; now: number }): Promise<void>;
  /** The fence: BLOCKED with the job that caused it. */
  blockWorkspace(input: { workspaceId: string; blockedBy: string; reason: string; now: number }): Promise<void>;
  /** An operator lifts the fence; the cursor counts as finished so the next job may run. */
  unblockWorkspace(workspaceId: string, now: number): Promise<WorkspaceRecord>;
  /**
   * Claims the repository branch for the workspace (one conditional write): bound when it is free,
   * already the workspace's, or held by a workspace bound to another branch since (a claim whose
   * job never bound its workspace: isStaleBinding); otherwise taken, naming the holder.
   */
  bindBranch(input: BindBranchInput): Promise<BranchBinding>;
  /** Gives up a claim this job made (its workspace refused the job); a claim made by another job stays. */
  releaseBranch(input: Omit<BindBranchInput, 'now'>): Promise<void>;
}

export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

/** Structured logger (Powertools Logger satisfies it); ids go in `extra`, payloads never do. */
export interface JobLogger {
  debug(message: string, ...extra: Record<string, unknown>[]): void;
  info(message: string, ...extra: Record<string, unknown>[]): void;
  warn(message: string, ...extra: Record<string, unknown>[]): void;
  error(message: string, ...extra: Record<string, unknown>[]): void;
}

/** Counts and gauges (Powertools Metrics on AWS): job metrics carry the dimension jobType. */
export interface JobMetrics {
  count(metric: JobMetricName, jobType?: JobType): void;
  /** A value measured now (e.g. the reconciler's oldest overdue build, in seconds). */
  gauge?(metric: JobMetricName, value: number, unit: 'Count' | 'Seconds'): void;
}

/** The SQS operations a consumer needs beyond what the event source mapping does. */
export interface QueueOps {
  /** Sends the message to the source queue's DLQ with its attributes plus `reason` and `errorMessage`. */
  moveToDlq(record: SQSRecord, failure: JobFailure): Promise<void>;
  /** Sets the message's visibility timeout (back-off before the retry; heartbeats). */
  changeVisibility(record: SQSRecord, seconds: number): Promise<void>;
  /**
   * Sends a message to a stage queue with the given string attributes; `groupId` is its message
   * group (a stage queue is a fair queue whose groups are tenants: envelope.ts tenantGroupId).
   */
  send(queueUrl: string, body: string, attributes: Record<string, string>, groupId: string): Promise<void>;
  /**
   * Sends a copy of the record to its own queue (body, attributes with `attributes` over them, its
   * message group), visible after `delaySeconds` (SQS allows 0..900): a standard queue's way to
   * give a message a new receive count. The caller acknowledges the original.
   */
  requeue(record: SQSRecord, delaySeconds: number, attributes: Record<string, string>): Promise<void>;
  /** Puts a copy of a message that is no longer on its queue on that queue's DLQ, with `reason` and `errorMessage`. */
  sendToDlq(
    dlqUrl: string,
    message: { body: string; attributes: Record<string, string>; groupId?: string },
    failure: JobFailure,
  ): Promise<void>;
}
