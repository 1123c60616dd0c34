/**
 * Ledger rules, pure: what an existing job or workspace record means for a delivery. The DynamoDB
 * adapter (lambda/adapters/dynamodb-ledger.ts) turns `isClaimable` / `canTakeWorkspace` into
 * condition expressions and, when a condition fails, reads the record and asks `claimOutcome` /
 * `workspaceTakeOutcome` what to do. Keeping both sides here lets unit tests pin every case.
 */
import type { JobEnvelope, Pin } from './envelope';
import type { JobFailure, JobRecord, JobStatus, WorkspaceRecord } from './ports';

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
  /** The delivery is an operator's redrive from the DLQ (message attribute `redrive`). */
  readonly redrive: boolean;
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
  /** The sequencer meets a job it already pinned and forwarded: re-send with the recorded pin. */
  | { readonly kind: 'forwarded'; readonly record: JobRecord }
  /** The record changed between the failed write and the read (e.g. the lease just expired). */
  | { readonly kind: 'retry' };

/**
 * Finished statuses only a redriven delivery takes over (decisions §2). The job then runs again
 * from the start: the claim drops the progress of the failed run (e.g. a broken build's id), so
 * the operator's redrive does not resume it.
 */
export const RERUN_STATUSES: readonly JobStatus[] = ['SKIPPED', 'FAILED'];

/**
 * Statuses a claim takes over whatever the lease says: a stage consumer takes the FORWARDED
 * record the sequencer left; a redriven delivery takes a SKIPPED or FAILED one.
 */
export function takeoverStatuses(consumer: Consumer, redrive: boolean): JobStatus[] {
  const statuses: JobStatus[] = consumer === 'stage' ? ['FORWARDED'] : [];
  return redrive ? [...statuses, ...RERUN_STATUSES] : statuses;
}

export function isLeaseLive(record: Pick<JobRecord, 'leaseUntil'>, now: number): boolean {
  return record.leaseUntil !== undefined && record.leaseUntil > now;
}

/** The rule the claim's condition expression encodes; only the same request may take a record over. */
export function isClaimable(existing: JobRecord | undefined, req: ClaimRequest): boolean {
  if (existing === undefined) return true;
  if (existing.digest !== req.digest) return false;
  if (existing.status === 'IN_FLIGHT') return !isLeaseLive(existing, req.now);
  return takeoverStatuses(req.consumer, req.redrive).includes(existing.status);
}

/** What a record that refused the claim means (read with a consistent read after the failed write). */
export function claimOutcome(existing: JobRecord | undefined, req: ClaimRequest): ClaimOutcome {
  if (existing === undefined || isClaimable(existing, req)) return { kind: 'retry' };
  // A tombstone left by `cancel` before the job was ever seen carries no digest: cancel wins.
  if (existing.status === 'CANCELLED') return { kind: 'cancelled', record: existing };
  if (existing.digest !== req.digest) return { kind: 'conflict', record: existing };
  // Pinned and past FORWARDED: a stage consumer took it, so its verdict is the stage's (and on the stage's DLQ).
  if (req.consumer === 'sequencer' && existing.pin !== undefined && existing.status !== 'FORWARDED') return { kind: 'staged', record: existing };
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
  }
}

/** DynamoDB TTL (epoch seconds): longer than the DLQ retention, so a replay still finds its record. */
export function ttlFor(now: number, retentionDays: number): number {
  return Math.floor(now / 1000) + retentionDays * 86_400;
}

export type WorkspaceTakeOutcome =
  /** The cursor moved to this job (or already pointed at it after a redelivery). */
  | { readonly kind: 'taken'; readonly workspace: WorkspaceRecord }
  /** BLOCKED: the job is skipped. */
  | { readonly kind: 'blocked'; readonly workspace: WorkspaceRecord }
  /** The previous job left the queue without a verdict: fence the workspace, skip this job. */
  | { readonly kind: 'predecessorUnfinished'; readonly workspace: WorkspaceRecord; readonly predecessor: string }
  | { readonly kind: 'retry' };

/** The rule the cursor update's condition encodes (decisions §3). */
export function canTakeWorkspace(ws: WorkspaceRecord | undefined): boolean {
  return ws === undefined || (ws.state === 'ACTIVE' && ws.currentDone !== false);
}

/** Why the cursor refused a job, from a consistent read of the workspace record. */
export function workspaceTakeOutcome(ws: WorkspaceRecord | undefined, jobId: string): WorkspaceTakeOutcome {
  if (ws === undefined || canTakeWorkspace(ws)) return { kind: 'retry' };
  if (ws.state === 'BLOCKED') return { kind: 'blocked', workspace: ws };
  // A redelivery of the job that holds the cursor (it crashed or timed out mid-run): run it again.
  if (ws.currentJobId === jobId || ws.currentJobId === undefined) return { kind: 'taken', workspace: ws };
  return { kind: 'predecessorUnfinished', workspace: ws, predecessor: ws.currentJobId };
}

/** How a claimed job ends; `complete` writes it fenced on the lease owner. */
export type JobVerdict =
  | { readonly status: 'SUCCEEDED'; readonly result: Record<string, unknown> }
  | { readonly status: 'FAILED'; readonly error: JobFailure }
  | { readonly status: 'SKIPPED'; readonly blockedBy: string; readonly error: JobFailure }
  | { readonly status: 'FORWARDED'; readonly pin: Pin };

export interface CompleteInput {
  readonly jobId: string;
  readonly owner: string;
  readonly now: number;
  readonly verdict: JobVerdict;
  /** Position in the workspace's order: indexes the job under `byWorkspace`. */
  readonly workspace?: { readonly workspaceId: string; readonly seq: number };
}

export interface TakeWorkspaceInput {
  readonly workspaceId: string;
  readonly jobId: string;
  /** apply_patch names the workspace's repository; the first one recorded stays. */
  readonly repo?: { readonly url: string; readonly branch: string };
  readonly now: number;
}

/** Outcomes after the adapter retried races away. */
export type SettledClaim = Exclude<ClaimOutcome, { kind: 'retry' }>;
export type SettledTake = Exclude<WorkspaceTakeOutcome, { kind: 'retry' }>;

export type CancelOutcome = { readonly cancelled: true } | { readonly cancelled: false; readonly record: JobRecord };

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
  /** A job not yet started (absent) or SKIPPED becomes CANCELLED; anything else is returned as is. */
  cancel(jobId: string, now: number): Promise<CancelOutcome>;
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
}
