/**
 * An in-memory Ledger for unit tests of the pipeline and the processors. It decides with the same
 * pure rules as the DynamoDB adapter (src/core/ledger.ts: isClaimable, claimOutcome,
 * canTakeWorkspace, workspaceTakeOutcome) and mirrors the adapter where a refusal comes without the
 * old item (on dynalite): write, then read, so a race between a refused write and its read can be
 * staged with `onRefusedClaim`. The ledger contract (test/support/ledger-contract.ts) runs the same
 * cases against this fake and against DynamoDbLedger on either emulator, so they cannot drift apart.
 *
 * Records are copied in and out: a caller cannot change the stored state by mutating what it got.
 */
import { LeaseLostError, TransientJobError } from '../../src/core/errors';
import type { JobEnvelope } from '../../src/core/envelope';
import {
  branchBindingKey,
  byCreation,
  cancelRule,
  canTakeWorkspace,
  claimOutcome,
  conflictEntry,
  dismissRefusal,
  isClaimable,
  isStaleBinding,
  LISTS,
  listSortKey,
  queuedRecord,
  MAX_CONFLICTS,
  RERUN_STATUSES,
  ttlFor,
  workspaceTakeOutcome,
} from '../../src/core/ledger';
import {
  FINISHED_WITH_EVENT,
  UNFINISHED_STATUSES,
  type BindBranchInput,
  type BranchBinding,
  type CancelOutcome,
  type ClaimRequest,
  type CompleteInput,
  type ConflictAttempt,
  type ConflictSeenBy,
  type DismissOutcome,
  type DlqEntry,
  type JobDismissal,
  type FinishBuildInput,
  type FinishBuildOutcome,
  type JobRecord,
  type Ledger,
  type QueueOutcome,
  type SettledClaim,
  type SettledTake,
  type TakeWorkspaceInput,
  type WorkspacePage,
  type WorkspacePageRequest,
  type WorkspaceRecord,
} from '../../src/core/ports';

/** As DynamoDbLedger: a refused write whose read finds the record claimable again is retried this often. */
const MAX_RACE_RETRIES = 3;

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export interface MemoryLedgerOptions {
  /** @default 30 */
  readonly retentionDays?: number;
  /** Runs after a claim's write was refused and before the record is read: stages a race. */
  readonly onRefusedClaim?: (req: ClaimRequest) => Promise<void> | void;
}

const iso = (now: number) => new Date(now).toISOString();
const copy = <T>(value: T): T => structuredClone(value);

export class MemoryLedger implements Ledger {
  private readonly jobs = new Map<string, JobRecord>();
  private readonly workspaces = new Map<string, WorkspaceRecord>();
  /** The workspace a completed job is indexed under (the adapter's `wsKey`, not part of JobRecord). */
  private readonly workspaceOf = new Map<string, string | undefined>();
  /** The adapter's `byList` entries (listKey, listSort) by primary key: `job#`, `ws#`, `conflict#`. */
  private readonly lists = new Map<string, { key: string; sort: string }>();
  private readonly conflicts = new Map<string, { attempts: ConflictAttempt[]; tokens: Set<string> }>();
  /** Branch bindings by branchBindingKey: the workspace and the job that claimed the branch. */
  private readonly branches = new Map<string, { workspaceId: string; jobId: string }>();
  private readonly retentionDays: number;

  constructor(private readonly options: MemoryLedgerOptions = {}) {
    this.retentionDays = options.retentionDays ?? 30;
  }

  async claim(req: ClaimRequest): Promise<SettledClaim> {
    for (let attempt = 0; attempt < MAX_RACE_RETRIES; attempt++) {
      const written = this.tryClaim(req);
      if (written) return { kind: 'claimed', record: copy(written) };
      await this.options.onRefusedClaim?.(req);
      const outcome = claimOutcome(this.jobs.get(req.job.jobId), req);
      if (outcome.kind !== 'retry') return copy(outcome);
    }
    throw new TransientJobError(`claim of job ${req.job.jobId} kept racing with other writers`);
  }

  /**
   * The claim's conditional write; a redrive's takeover of a FAILED or SKIPPED record starts a new
   * run: it drops the old run's progress and build-completion state and adds one to `run`.
   */
  private tryClaim(req: ClaimRequest): JobRecord | undefined {
    const existing = this.jobs.get(req.job.jobId);
    if (!isClaimable(existing, req)) return undefined;
    const { job } = req;
    const rerun = existing !== undefined && RERUN_STATUSES.includes(existing.status);
    const { error: _error, blockedBy: _blockedBy, progress, ...kept } = existing ?? ({} as Partial<JobRecord>);
    if (rerun) {
      for (const field of ['dueAt', 'stageMessage', 'reportedAt', 'result', 'redriveToken'] as const)
        delete kept[field];
    }
    const record: JobRecord = {
      ...kept,
      ...(rerun ? { run: (existing.run ?? 0) + 1 } : {}),
      ...(rerun || progress === undefined ? {} : { progress }),
      jobId: job.jobId,
      workspaceId: job.workspaceId,
      tenantId: job.tenantId,
      type: job.type,
      status: 'IN_FLIGHT',
      digest: req.digest,
      leaseOwner: req.owner,
      leaseUntil: req.now + req.leaseMs,
      attempt: (existing?.attempt ?? 0) + 1,
      createdAt: existing?.createdAt ?? job.createdAt,
      startedAt: iso(req.now),
      updatedAt: iso(req.now),
      ttl: ttlFor(req.now, this.retentionDays),
    };
    this.jobs.set(job.jobId, record);
    const pk = `job#${job.jobId}`;
    // As the adapter: the job is open from here on; a rerun moves it off the DLQ list.
    if (rerun || !this.lists.has(pk))
      this.lists.set(pk, { key: LISTS.open(job.workspaceId), sort: listSortKey(iso(req.now), job.jobId) });
    return record;
  }

  async complete(input: CompleteInput): Promise<JobRecord> {
    const current = this.held(input.jobId, input.owner, 'before completion');
    const { verdict } = input;
    const { leaseUntil: _leaseUntil, ...rest } = current;
    const record: Mutable<JobRecord> = { ...rest, status: verdict.status, updatedAt: iso(input.now) };
    if (verdict.status === 'SUCCEEDED') record.result = verdict.result;
    if (verdict.status === 'FAILED' || verdict.status === 'SKIPPED') record.error = verdict.error;
    if (verdict.status === 'SKIPPED') record.blockedBy = verdict.blockedBy;
    if (verdict.status === 'FORWARDED') {
      record.pin = verdict.pin;
      record.attempt = 0;
    }
    if (verdict.status === 'RUNNING') {
      record.dueAt = verdict.dueAt;
      record.stageMessage = verdict.stageMessage;
    }
    if (input.workspace) record.wsSeq = input.workspace.seq;
    if (input.workspace?.previousSeq !== undefined)
      record.earlierSeqs = [...(current.earlierSeqs ?? []), input.workspace.previousSeq];
    const pk = `job#${input.jobId}`;
    if (verdict.status === 'FAILED' || verdict.status === 'SKIPPED')
      this.lists.set(pk, { key: LISTS.dlq, sort: listSortKey(iso(input.now), input.jobId) });
    if (verdict.status === 'SUCCEEDED') this.lists.delete(pk);
    this.jobs.set(input.jobId, copy(record));
    this.workspaceOf.set(input.jobId, input.workspace?.workspaceId ?? this.workspaceOf.get(input.jobId));
    return copy(record);
  }

  /** The adapter's condition: RUNNING with this build recorded. A record with `dueAt` is on its due index. */
  async finishBuild(input: FinishBuildInput): Promise<FinishBuildOutcome> {
    const current = this.jobs.get(input.jobId);
    if (current?.status !== 'RUNNING' || current.progress?.['buildId'] !== input.buildId)
      return { kind: 'refused', record: copy(current) };
    const { verdict } = input;
    const record: Mutable<JobRecord> = {
      ...current,
      status: verdict.status,
      dueAt: input.reportBy,
      updatedAt: iso(input.now),
    };
    if (verdict.status === 'SUCCEEDED') record.result = verdict.result;
    else record.error = verdict.error;
    // The lists, as `complete` moves them.
    const pk = `job#${input.jobId}`;
    if (verdict.status === 'FAILED')
      this.lists.set(pk, { key: LISTS.dlq, sort: listSortKey(iso(input.now), input.jobId) });
    else this.lists.delete(pk);
    this.jobs.set(input.jobId, copy(record));
    return { kind: 'finished', record: copy(record) };
  }

  async markReported(input: { jobId: string; buildId: string; now: number }): Promise<void> {
    const current = this.jobs.get(input.jobId);
    if (current?.progress?.['buildId'] !== input.buildId) return;
    const { dueAt: _dueAt, ...rest } = current;
    this.jobs.set(input.jobId, { ...rest, reportedAt: iso(input.now), updatedAt: iso(input.now) });
  }

  async postponeDue(input: { jobId: string; buildId: string; dueAt: number; now: number }): Promise<void> {
    const current = this.jobs.get(input.jobId);
    if (current?.status !== 'RUNNING' || current.progress?.['buildId'] !== input.buildId) return;
    this.jobs.set(input.jobId, { ...current, dueAt: input.dueAt, updatedAt: iso(input.now) });
  }

  async listDue(now: number, limit: number): Promise<JobRecord[]> {
    return [...this.jobs.values()]
      .filter((job) => job.dueAt !== undefined && job.dueAt <= now)
      .sort((a, b) => (a.dueAt ?? 0) - (b.dueAt ?? 0))
      .slice(0, limit)
      .map(copy);
  }

  async heartbeat(input: { jobId: string; owner: string; leaseUntil: number; now: number }): Promise<void> {
    this.update(input.jobId, input.owner, { leaseUntil: input.leaseUntil, updatedAt: iso(input.now) });
  }

  async release(input: { jobId: string; owner: string; now: number }): Promise<void> {
    this.update(input.jobId, input.owner, { leaseUntil: input.now, updatedAt: iso(input.now) });
  }

  async recordProgress(input: {
    jobId: string;
    owner: string;
    progress: Record<string, string>;
    now: number;
  }): Promise<void> {
    this.update(input.jobId, input.owner, { progress: copy(input.progress), updatedAt: iso(input.now) });
  }

  private update(jobId: string, owner: string, changes: Partial<JobRecord>): void {
    this.jobs.set(jobId, { ...this.held(jobId, owner, ''), ...changes });
  }

  /** The record of a job this owner holds, or LeaseLostError (the adapter's fenced condition). */
  private held(jobId: string, owner: string, when: string): JobRecord {
    const current = this.jobs.get(jobId);
    if (current?.status !== 'IN_FLIGHT' || current.leaseOwner !== owner) {
      throw new LeaseLostError(`job ${jobId}: lease of ${owner} was taken over${when ? ` ${when}` : ''}`);
    }
    return current;
  }

  async getJob(jobId: string): Promise<JobRecord | undefined> {
    return copy(this.jobs.get(jobId));
  }

  async getWorkspace(workspaceId: string): Promise<WorkspaceRecord | undefined> {
    return copy(this.workspaces.get(workspaceId));
  }

  async listWorkspaceJobs(workspaceId: string): Promise<JobRecord[]> {
    return [...this.jobs.values()]
      .filter((job) => job.wsSeq !== undefined && this.workspaceOf.get(job.jobId) === workspaceId)
      .sort((a, b) => (a.wsSeq ?? 0) - (b.wsSeq ?? 0))
      .map(copy);
  }

  async pageWorkspaceJobs(workspaceId: string, request: WorkspacePageRequest): Promise<WorkspacePage> {
    const all = await this.listWorkspaceJobs(workspaceId);
    const ordered = request.order === 'oldest' ? all : all.reverse();
    const { after } = request;
    const rest =
      after === undefined
        ? ordered
        : ordered.filter((j) => (request.order === 'oldest' ? (j.wsSeq ?? 0) > after : (j.wsSeq ?? 0) < after));
    return { jobs: rest.slice(0, request.limit), more: rest.length > request.limit };
  }

  async listUnfinished(): Promise<JobRecord[]> {
    return [...this.jobs.values()]
      .filter((job) => UNFINISHED_STATUSES.includes(job.status))
      .sort(byCreation)
      .map(copy);
  }

  async listFinishedSince(since: number): Promise<JobRecord[]> {
    return [...this.jobs.values()]
      .filter((job) => FINISHED_WITH_EVENT.includes(job.status) && job.updatedAt >= iso(since))
      .sort(byCreation)
      .map(copy);
  }

  async cancel(jobId: string, now: number): Promise<CancelOutcome> {
    const existing = this.jobs.get(jobId);
    const rule = existing === undefined ? undefined : cancelRule(existing, now);
    if (existing === undefined || rule === undefined || rule.kind === 'refused')
      return { cancelled: false, record: copy(existing) };
    const { leaseUntil: _leaseUntil, ...rest } = existing;
    // A stopped build is the reconciler's to stop: the job stays due until it has (markBuildStopped).
    const record: JobRecord = {
      ...rest,
      status: 'CANCELLED',
      updatedAt: iso(now),
      ...(rule.kind === 'stopBuild' ? { dueAt: now } : {}),
    };
    this.jobs.set(jobId, record);
    // Cancelled while QUEUED: it never gets a turn, and stays on its workspace's open list (ports.ts).
    if (existing.status !== 'QUEUED') this.lists.delete(`job#${jobId}`);
    return { cancelled: true, previous: existing.status, record: copy(record) };
  }

  async markBuildStopped(input: { jobId: string; now: number }): Promise<void> {
    const current = this.jobs.get(input.jobId);
    if (current?.status !== 'CANCELLED') return;
    const { dueAt: _dueAt, ...rest } = current;
    this.jobs.set(input.jobId, { ...rest, reportedAt: iso(input.now), updatedAt: iso(input.now) });
  }

  async dismiss(input: { jobId: string; dismissal: JobDismissal; now: number }): Promise<DismissOutcome> {
    const existing = this.jobs.get(input.jobId);
    if (existing?.dismissed !== undefined) return { kind: 'already', record: copy(existing) };
    if (existing === undefined || dismissRefusal(existing) !== undefined)
      return { kind: 'refused', record: copy(existing) };
    const { redriveToken: _token, ...rest } = existing;
    const record: JobRecord = { ...rest, dismissed: input.dismissal };
    this.jobs.set(input.jobId, record);
    this.lists.delete(`job#${input.jobId}`);
    return { kind: 'dismissed', record: copy(record) };
  }

  async authorizeRedrive(input: { jobId: string; token: string; now: number }): Promise<JobRecord | undefined> {
    const existing = this.jobs.get(input.jobId);
    if (existing === undefined || !RERUN_STATUSES.includes(existing.status) || existing.dismissed !== undefined)
      return undefined;
    const record: JobRecord = { ...existing, redriveToken: input.token };
    this.jobs.set(input.jobId, record);
    return copy(record);
  }

  async recordQueued(input: { job: JobEnvelope; digest: string; now: number }): Promise<QueueOutcome> {
    const { job } = input;
    const known = this.jobs.get(job.jobId);
    if (known) return { kind: 'known', record: copy(known) };
    const record = queuedRecord(job, input.digest, input.now, this.retentionDays);
    this.jobs.set(job.jobId, record);
    this.lists.set(`job#${job.jobId}`, {
      key: LISTS.open(job.workspaceId),
      sort: listSortKey(record.updatedAt, job.jobId),
    });
    return { kind: 'queued', record: copy(record) };
  }

  async recordConflict(input: {
    job: JobEnvelope;
    digest: string;
    seenBy: ConflictSeenBy;
    now: number;
  }): Promise<void> {
    const { job } = input;
    const { attempt, token, queue } = conflictEntry(job, input.digest, input.seenBy, input.now);
    const entry = this.conflicts.get(job.jobId) ?? { attempts: [], tokens: new Set<string>() };
    if (entry.tokens.has(token) || entry.attempts.length >= MAX_CONFLICTS) return;
    entry.tokens.add(token);
    entry.attempts.push(attempt);
    this.conflicts.set(job.jobId, entry);
    const pk = `conflict#${job.jobId}`;
    if (queue && !this.lists.has(pk)) this.lists.set(pk, { key: LISTS.dlq, sort: listSortKey(attempt.at, pk) });
  }

  async getConflicts(jobId: string): Promise<ConflictAttempt[]> {
    return copy(this.conflicts.get(jobId)?.attempts ?? []);
  }

  async getConflictsOf(jobIds: readonly string[]): Promise<Map<string, ConflictAttempt[]>> {
    return new Map(
      jobIds.flatMap((jobId) =>
        this.conflicts.has(jobId) ? [[jobId, copy(this.conflicts.get(jobId)?.attempts ?? [])] as const] : [],
      ),
    );
  }

  async listWorkspaces(): Promise<WorkspaceRecord[]> {
    return this.inList(LISTS.workspaces).flatMap((pk) => copy(this.workspaces.get(pk.slice('ws#'.length)) ?? []));
  }

  async listOpenJobs(workspaceId: string): Promise<JobRecord[]> {
    return this.inList(LISTS.open(workspaceId)).flatMap((pk) => copy(this.jobs.get(pk.slice('job#'.length)) ?? []));
  }

  async listDlq(): Promise<DlqEntry[]> {
    return this.inList(LISTS.dlq).flatMap((pk): DlqEntry[] => {
      if (pk.startsWith('job#')) {
        const record = this.jobs.get(pk.slice('job#'.length));
        return record ? [{ kind: 'job', record: copy(record) }] : [];
      }
      const attempts = this.conflicts.get(pk.slice('conflict#'.length))?.attempts ?? [];
      return attempts
        .filter((a) => a.seenBy !== 'enqueue')
        .map((attempt) => ({ kind: 'conflict', attempt: copy(attempt) }));
    });
  }

  /** The primary keys in a list, in the adapter's index order (by sort key). */
  private inList(key: string): string[] {
    return [...this.lists]
      .filter(([, entry]) => entry.key === key)
      .sort(([, a], [, b]) => (a.sort < b.sort ? -1 : a.sort > b.sort ? 1 : 0))
      .map(([pk]) => pk);
  }

  async takeWorkspace(input: TakeWorkspaceInput): Promise<SettledTake> {
    const existing = this.workspaces.get(input.workspaceId);
    if (!canTakeWorkspace(existing, input.repo)) {
      const outcome = workspaceTakeOutcome(existing, input.jobId, input.repo);
      // The adapter retries a race away; with no concurrent writer between write and read there is none.
      if (outcome.kind === 'retry') throw new Error('unreachable: a refused take re-read as takeable');
      return copy(outcome);
    }
    const workspace: WorkspaceRecord = {
      ...existing,
      workspaceId: input.workspaceId,
      state: existing?.state ?? 'ACTIVE',
      seq: (existing?.seq ?? 0) + 1,
      currentJobId: input.jobId,
      currentDone: false,
      ...(existing?.repo ? {} : input.repo ? { repo: input.repo } : {}),
      updatedAt: iso(input.now),
    };
    this.workspaces.set(input.workspaceId, workspace);
    this.lists.set(`ws#${input.workspaceId}`, { key: LISTS.workspaces, sort: input.workspaceId });
    return { kind: 'taken', workspace: copy(workspace) };
  }

  async nextWorkspaceSeq(workspaceId: string, now: number): Promise<number> {
    const existing = this.workspaces.get(workspaceId);
    const seq = (existing?.seq ?? 0) + 1;
    // Like the adapter's bare update: a record it creates has no state yet.
    this.workspaces.set(workspaceId, {
      ...(existing ?? ({ workspaceId } as WorkspaceRecord)),
      seq,
      updatedAt: iso(now),
    });
    return seq;
  }

  async finishWorkspaceJob(input: { workspaceId: string; jobId: string; head?: string; now: number }): Promise<void> {
    const existing = this.workspaces.get(input.workspaceId);
    if (existing?.currentJobId !== input.jobId)
      throw new LeaseLostError(`workspace ${input.workspaceId}: cursor no longer on job ${input.jobId}`);
    this.workspaces.set(input.workspaceId, {
      ...existing,
      currentDone: true,
      ...(input.head ? { head: input.head } : {}),
      updatedAt: iso(input.now),
    });
  }

  async blockWorkspace(input: { workspaceId: string; blockedBy: string; reason: string; now: number }): Promise<void> {
    const existing = this.workspaces.get(input.workspaceId);
    this.workspaces.set(input.workspaceId, {
      ...existing,
      workspaceId: input.workspaceId,
      seq: existing?.seq ?? 0,
      state: 'BLOCKED',
      blockedBy: input.blockedBy,
      blockedReason: input.reason,
      currentDone: true,
      updatedAt: iso(input.now),
    });
    this.lists.set(`ws#${input.workspaceId}`, { key: LISTS.workspaces, sort: input.workspaceId });
  }

  async unblockWorkspace(workspaceId: string, now: number): Promise<WorkspaceRecord> {
    const existing = this.workspaces.get(workspaceId);
    if (!existing) throw new Error(`workspace ${workspaceId} does not exist`);
    const { blockedBy: _by, blockedReason: _reason, ...rest } = existing;
    const workspace: WorkspaceRecord = { ...rest, state: 'ACTIVE', currentDone: true, updatedAt: iso(now) };
    this.workspaces.set(workspaceId, workspace);
    return copy(workspace);
  }

  /** The adapter's conditional writes: free or this workspace's; a stale holder's handed over. */
  async bindBranch(input: BindBranchInput): Promise<BranchBinding> {
    const key = branchBindingKey(input.repo);
    const holder = this.branches.get(key);
    if (
      holder !== undefined &&
      holder.workspaceId !== input.workspaceId &&
      !isStaleBinding(this.workspaces.get(holder.workspaceId), input.repo)
    ) {
      return { kind: 'taken', holder: { ...holder } };
    }
    // Kept with the job that made it, as the adapter's if_not_exists keeps it.
    this.branches.set(
      key,
      holder?.workspaceId === input.workspaceId ? holder : { workspaceId: input.workspaceId, jobId: input.jobId },
    );
    return { kind: 'bound' };
  }

  async releaseBranch(input: Omit<BindBranchInput, 'now'>): Promise<void> {
    const key = branchBindingKey(input.repo);
    const holder = this.branches.get(key);
    if (holder?.workspaceId === input.workspaceId && holder.jobId === input.jobId) this.branches.delete(key);
  }
}
