/**
 * The ordered lane's processor (the sequencer): consumes the FIFO queue, one message group per
 * workspace. It takes each job in the workspace's order (the cursor, docs/decisions.md §3), runs an
 * ordered job type's mutation itself (the only writer of a workspace), pins a staged job to the
 * workspace head and forwards it to its stage queue, and fences the workspace when a job fails for
 * good. Everything else is the shared pipeline (pipeline.ts) and the FIFO batch planner
 * (fifo-batch.ts).
 */
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { WorkspaceBlockedDetail } from '../../contract/events';
import { gitHostProblem, type GitHostPolicy } from '../../contract/git-remotes';
import { JOB_TYPES, type OrderedJobType, type StagedJobType } from '../../contract/job-types';
import { wireJson } from '../../contract/messages';
import { jobAttributes, messageGroupId, parseEnvelope, tenantGroupId, type JobEnvelope, type Pin } from './envelope';
import {
  InvalidJobError,
  LeaseHeldError,
  LeaseLostError,
  PermanentJobError,
  RefusedBeforeTurnError,
  type PermanentReason,
} from './errors';
import { processFifoBatch } from './fifo-batch';
import {
  createRecordProcessor,
  receiveCount,
  type JobContext,
  type JobProcessor,
  type PipelineDeps,
  type RunResult,
  type RunVerdict,
} from './pipeline';
import {
  SKIPPED_REASON,
  type JobRecord,
  type SettledTake,
  type WorkspaceGit,
  type WorkspaceRecord,
  type WorkspaceRepo,
} from './ports';

/** What an ordered job type does at its turn; the sequencer does the rest. */
export interface OrderedJobProcessor<T extends OrderedJobType = OrderedJobType> {
  /** The repository and branch the job names: a workspace is bound to the first one recorded. */
  workspaceRepo(job: JobEnvelope<T>): { readonly url: string; readonly branch: string };
  /** The side effect, idempotent in the target; returns the workspace's new head commit. */
  mutate(job: JobEnvelope<T>): Promise<{ readonly head: string; readonly result: Record<string, unknown> }>;
}

export type OrderedJobProcessors = { readonly [T in OrderedJobType]: OrderedJobProcessor<T> };

export interface SequencerDeps extends PipelineDeps {
  /** One processor per ordered job type of the catalog (a missing one does not compile). */
  readonly ordered: OrderedJobProcessors;
  /** Reads branch heads to pin a staged job when no mutation has recorded one yet. */
  readonly git: Pick<WorkspaceGit, 'branchHead'>;
  /** Stage queue URL per staged job type. */
  readonly stageQueueUrls: Readonly<Record<StagedJobType, string>>;
  /** The git hosts the sequencer may dial (the configuration's allow-list). */
  readonly gitHosts: GitHostPolicy;
}

function isOrdered(job: JobEnvelope): job is JobEnvelope<OrderedJobType> {
  return JOB_TYPES[job.type].lane === 'ordered';
}

/** The processor of an ordered job's type: a lookup keyed by the job's own type, which TypeScript cannot correlate. */
function processorOf(ordered: OrderedJobProcessors, job: JobEnvelope<OrderedJobType>): OrderedJobProcessor {
  return ordered[job.type] as OrderedJobProcessor;
}

class SequencerProcessor implements JobProcessor {
  constructor(private readonly deps: SequencerDeps) {}

  /**
   * The envelope, in its workspace's message group and no other: a workspace's jobs are serial only
   * inside ws#<workspaceId>, so a job sent elsewhere could run beside its predecessor (and fence
   * the workspace as PREDECESSOR_UNFINISHED) or in another workspace's order.
   */
  parse(body: string, record: SQSRecord): JobEnvelope {
    const job = parseEnvelope(body);
    const expected = messageGroupId(job.workspaceId);
    const group = record.attributes.MessageGroupId;
    if (group !== expected) {
      throw new InvalidJobError(
        `job ${job.jobId}: the message group must be ${expected} (its workspace's), got ${group === undefined ? 'none' : JSON.stringify(group)}`,
      );
    }
    return job;
  }

  async run(job: JobEnvelope, ctx: JobContext): Promise<RunResult> {
    const { ledger, clock } = this.deps;
    const ordered = isOrdered(job) ? { job, processor: processorOf(this.deps.ordered, job) } : undefined;
    const repo = ordered?.processor.workspaceRepo(ordered.job);
    if (repo) {
      // Before the turn: a refused host or branch binds no workspace and blocks none.
      this.checkHost(job, repo.url, (message) => new RefusedBeforeTurnError('HOST_NOT_ALLOWED', message));
      await this.claimBranch(job, repo);
    }
    const take = await ledger.takeWorkspace({ workspaceId: job.workspaceId, jobId: job.jobId, repo, now: clock.now() });
    if (take.kind === 'mismatch') {
      // The branch this job claimed is not its workspace's: another workspace may bind it.
      if (repo) await ledger.releaseBranch({ repo, workspaceId: job.workspaceId, jobId: job.jobId });
      throw mismatchError(job, take.workspace, repo);
    }
    if (take.kind === 'predecessorUnfinished') await this.waitForPredecessor(take.predecessor, ctx);
    if (take.kind !== 'taken') return { verdict: await this.skip(job, take, ctx) };
    ctx.placeInWorkspace({ workspaceId: job.workspaceId, seq: take.workspace.seq });
    if (ordered) {
      const { head, result } = await ordered.processor.mutate(ordered.job);
      // Head and cursor in one write, before the ledger completes: a redelivery finds the effect anyway.
      await ledger.finishWorkspaceJob({ workspaceId: job.workspaceId, jobId: job.jobId, head, now: clock.now() });
      return { verdict: { status: 'SUCCEEDED', result } };
    }
    // Every other job type is staged (contract/job-types.ts): pinned here, run by its stage consumer.
    const pin = await this.pin(job, take.workspace);
    await ledger.finishWorkspaceJob({ workspaceId: job.workspaceId, jobId: job.jobId, now: clock.now() });
    return { verdict: { status: 'FORWARDED', pin } };
  }

  /**
   * The job before this one holds the cursor unfinished, and its message has left the queue (the
   * FIFO group let this one through). Its worker may still be at work: a job busy on every receive
   * SQS allows is moved to the DLQ by the queue's redrive policy while its worker holds it. While
   * its record says IN_FLIGHT this job comes back later (until that lease ends, at least) instead
   * of fencing the workspace by a job that may yet succeed; on this job's last allowed receive the
   * wait ends and the workspace is fenced, so a predecessor that died never holds it for longer.
   */
  private async waitForPredecessor(predecessor: string, ctx: JobContext): Promise<void> {
    const { ledger, clock, settings } = this.deps;
    if (receiveCount(ctx.record) >= settings.maxReceiveCount) return;
    const record = await ledger.getJob(predecessor);
    if (record?.status !== 'IN_FLIGHT') return;
    ctx.logger.warn('previous job unfinished, its message gone: waiting for its worker', {
      predecessor,
      leaseUntil: record.leaseUntil,
    });
    throw new LeaseHeldError(predecessor, Math.max(record.leaseUntil ?? 0, clock.now()));
  }

  private async skip(
    job: JobEnvelope,
    take: Exclude<SettledTake, { kind: 'taken' | 'mismatch' }>,
    ctx: JobContext,
  ): Promise<RunVerdict> {
    const { ledger, clock } = this.deps;
    let blockedBy = take.workspace.blockedBy ?? 'unknown';
    if (take.kind === 'blocked' && blockedBy === job.jobId) {
      // The job blocking its workspace, run again while the fence is up (a redrive that should have
      // waited for the unblock): its failure stands, never "SKIPPED, blocked by itself".
      const reason = (take.workspace.blockedReason ?? 'UNEXPECTED_ERROR') as PermanentReason;
      throw new RefusedBeforeTurnError(
        reason,
        `job ${job.jobId} still blocks workspace ${job.workspaceId} (${reason}): lift the fence first (workspace unblock ${job.workspaceId} --replay or --drop), then redrive it`,
      );
    }
    if (take.kind === 'predecessorUnfinished') {
      blockedBy = take.predecessor;
      ctx.logger.error('previous job left the queue unfinished: fencing the workspace', { predecessor: blockedBy });
      await this.fence(job.workspaceId, blockedBy, 'PREDECESSOR_UNFINISHED');
    }
    // Skipped jobs get a place in the workspace's order too, so a replay can follow it.
    ctx.placeInWorkspace({
      workspaceId: job.workspaceId,
      seq: await ledger.nextWorkspaceSeq(job.workspaceId, clock.now()),
    });
    return {
      status: 'SKIPPED',
      blockedBy,
      error: { reason: SKIPPED_REASON, message: `workspace ${job.workspaceId} is blocked by job ${blockedBy}` },
    };
  }

  /** The commit a staged job runs at: the head the last mutation recorded, else the branch head. */
  private async pin(job: JobEnvelope, workspace: WorkspaceRecord): Promise<Pin> {
    if (!workspace.repo)
      throw new PermanentJobError(
        'WORKSPACE_UNKNOWN',
        `workspace ${job.workspaceId} has no repository yet: send an apply_patch first`,
      );
    // A workspace bound before its host left the allow-list: its head is not read from there either.
    this.checkHost(job, workspace.repo.url, (message) => new PermanentJobError('HOST_NOT_ALLOWED', message));
    const sha = workspace.head ?? (await this.deps.git.branchHead(workspace.repo.url, workspace.repo.branch));
    if (!sha)
      throw new PermanentJobError(
        'WORKSPACE_UNKNOWN',
        `branch ${workspace.repo.branch} of workspace ${job.workspaceId} does not exist`,
      );
    return { sha, repoUrl: workspace.repo.url, branch: workspace.repo.branch };
  }

  /**
   * A repository branch belongs to one workspace (the first whose ordered job named it): a second
   * workspace on the branch (a case variant of an id, another spelling of the URL) would commit
   * past the first one's fence and interleave with its order. Refused before the turn.
   */
  private async claimBranch(job: JobEnvelope, repo: WorkspaceRepo): Promise<void> {
    const binding = await this.deps.ledger.bindBranch({
      repo,
      workspaceId: job.workspaceId,
      jobId: job.jobId,
      now: this.deps.clock.now(),
    });
    if (binding.kind === 'bound') return;
    const { holder } = binding;
    throw new RefusedBeforeTurnError(
      'BRANCH_IN_USE',
      `branch ${repo.branch} of ${repo.url} is bound to workspace ${holder.workspaceId} (by its job ${holder.jobId}): a branch has one workspace, so that two workspaces never interleave on it; ` +
        `send job ${job.jobId} to workspace ${holder.workspaceId}, or use another branch`,
    );
  }

  /** Refuses a repository whose host the sequencer may not dial (contract/git-remotes.ts). */
  private checkHost(job: JobEnvelope, repoUrl: string, refuse: (message: string) => PermanentJobError): void {
    const problem = gitHostProblem(repoUrl, this.deps.gitHosts);
    if (problem) throw refuse(`job ${job.jobId}: repository ${repoUrl}: ${problem}`);
  }

  /**
   * Forwards a pinned job; runs again for a redelivered FORWARDED job, and for one whose stage
   * lease ran out (its stage message may be gone), always with the recorded pin.
   */
  async afterComplete(job: JobEnvelope, record: JobRecord): Promise<void> {
    if (!record.pin || (record.status !== 'FORWARDED' && record.status !== 'IN_FLIGHT')) return;
    const type = job.type as StagedJobType;
    await this.deps.queueOps.send(
      this.deps.stageQueueUrls[type],
      wireJson({ ...job, pin: record.pin }),
      jobAttributes(job),
      tenantGroupId(job.tenantId),
    );
  }

  async onPermanentFailure(job: JobEnvelope, error: PermanentJobError, held: boolean): Promise<void> {
    // A conflict belongs to the original job with that id, not to this delivery; a refusal before
    // the job's turn left the tree and the cursor as they were.
    if (error.reason === 'CONFLICT' || error instanceof RefusedBeforeTurnError) return;
    if (this.fencesOnFailure(job, error, held)) return this.fence(job.workspaceId, job.jobId, error.reason);
    if (!held) return;
    await this.deps.ledger
      .finishWorkspaceJob({ workspaceId: job.workspaceId, jobId: job.jobId, now: this.deps.clock.now() })
      .catch((e: unknown) => {
        // The job failed before it took the cursor: nothing to release.
        if (!(e instanceof LeaseLostError)) throw e;
      });
  }

  /**
   * Whether a permanent failure fences the workspace: a failed mutation leaves the tree missing a
   * change, and a job that exhausted its retries or met an error no rule names may have left it
   * half-done (or never run, when the error came before its claim). An invalid job does not: its
   * input is checked before the mutation does any I/O (a diff that is not one, a diffRef that does
   * not match), so nothing reached the tree, as for an invalid envelope (docs/decisions.md §13);
   * its turn is released and the workspace goes on with the next job.
   */
  private fencesOnFailure(job: JobEnvelope, error: PermanentJobError, held: boolean): boolean {
    if (error.reason === 'RETRIES_EXHAUSTED' || error.reason === 'UNEXPECTED_ERROR') return true;
    return held && isOrdered(job) && error.reason !== 'INVALID_JOB';
  }

  private async fence(workspaceId: string, blockedBy: string, reason: string): Promise<void> {
    await this.deps.ledger.blockWorkspace({ workspaceId, blockedBy, reason, now: this.deps.clock.now() });
    this.deps.metrics.count('WorkspaceBlocked');
    this.deps.logger.warn('workspace blocked', { workspaceId, blockedBy, reason });
    await this.deps.events.publish('WorkspaceBlocked', {
      workspaceId,
      blockedBy,
      reason,
    } satisfies WorkspaceBlockedDetail);
  }
}

/** A job naming another repository or branch than its workspace's binding: refused, the workspace stays usable. */
function mismatchError(
  job: JobEnvelope,
  workspace: WorkspaceRecord,
  named: WorkspaceRepo | undefined,
): RefusedBeforeTurnError {
  const bound = workspace.repo ? `${workspace.repo.url} branch ${workspace.repo.branch}` : 'nothing';
  const asked = named ? `${named.url} branch ${named.branch}` : 'nothing';
  return new RefusedBeforeTurnError(
    'WORKSPACE_MISMATCH',
    `workspace ${job.workspaceId} is bound to ${bound} (by its first job); job ${job.jobId} names ${asked}: send it to a workspace of that repository`,
  );
}

/** The FIFO queue's batch handler over injected adapters (src/compose builds them for AWS and locally). */
export function createSequencer(deps: SequencerDeps): (event: SQSEvent) => Promise<SQSBatchResponse> {
  const process = createRecordProcessor(new SequencerProcessor(deps), deps);
  const release = (record: SQSEvent['Records'][number]) => deps.queueOps.changeVisibility(record, 0);
  return (event) => processFifoBatch(event.Records, process, release);
}
