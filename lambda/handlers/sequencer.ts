/**
 * The sequencer: consumes the FIFO queue (one message group per workspace). It takes each job in
 * the workspace's order (the cursor, docs/decisions.md §3), runs apply_patch itself (the only
 * writer of a workspace), pins run_tests / open_pr to the workspace head and forwards them to their
 * stage queue, and fences the workspace when a job fails for good. Everything else is the shared
 * pipeline (lambda/core/pipeline.ts) and the FIFO batch planner (lambda/core/fifo-batch.ts).
 */
import { mkdir } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { JOB_TYPES, SEQUENCER, type StagedJobType } from '../../contract/job-types';
import { ENV, stageQueueUrlEnv } from '../../contract/runtime-env';
import { jobAttributes, parseEnvelope, type JobEnvelope, type Pin } from '../core/envelope';
import { LeaseLostError, PermanentJobError } from '../core/errors';
import { processFifoBatch } from '../core/fifo-batch';
import type { SettledTake } from '../core/ledger';
import { createRecordProcessor, type JobContext, type JobProcessor, type PipelineDeps, type RunResult, type RunVerdict } from '../core/pipeline';
import type { DiffStore, JobRecord, WorkspaceRecord } from '../core/ports';
import * as gitAdapter from '../adapters/git';
import type { ApplyPatchCommitInput, ApplyPatchCommitResult, GitAuth } from '../adapters/git';
import { S3DiffStore } from '../adapters/diff-store';
import { awsClients, awsPipelineDeps, logger, requireEnv } from '../adapters/runtime';
import { SecretsManagerSecrets, type SecretsSource } from '../adapters/secrets';

/** The git adapter (lambda/adapters/git) as the sequencer uses it; tests wrap it to inject faults. */
export interface GitPort {
  applyPatchCommit(input: ApplyPatchCommitInput): Promise<ApplyPatchCommitResult>;
  /** The branch's head commit, or undefined when the branch does not exist. */
  resolveBranchHead(repoUrl: string, branch: string, auth?: GitAuth): Promise<string | undefined>;
}

export interface SequencerDeps extends PipelineDeps {
  readonly diffStore: DiffStore;
  readonly git: GitPort;
  readonly secrets: Pick<SecretsSource, 'gitCredentials'>;
  /** Stage queue URL per staged job type. */
  readonly stageQueueUrls: Readonly<Record<StagedJobType, string>>;
  /** Scratch space for git work (Lambda: /tmp). */
  readonly workRoot: string;
}

const SKIPPED_REASON = 'SKIPPED';

/**
 * Whether a permanent failure fences the workspace: a failed apply_patch leaves the tree missing a
 * patch, and a job that exhausted its retries may have left it half-done (or never run).
 */
function fencesOnFailure(job: JobEnvelope, error: PermanentJobError, held: boolean): boolean {
  if (error.reason === 'RETRIES_EXHAUSTED') return true;
  return held && job.type === 'apply_patch';
}

class SequencerProcessor implements JobProcessor {
  constructor(private readonly deps: SequencerDeps) {}

  parse(body: string): JobEnvelope {
    return parseEnvelope(body);
  }

  async run(job: JobEnvelope, ctx: JobContext): Promise<RunResult> {
    const { ledger, clock } = this.deps;
    const repo = job.type === 'apply_patch' ? job.payload.repo : undefined;
    const take = await ledger.takeWorkspace({ workspaceId: job.workspaceId, jobId: job.jobId, repo, now: clock.now() });
    if (take.kind !== 'taken') return { verdict: await this.skip(job, take, ctx) };
    ctx.placeInWorkspace({ workspaceId: job.workspaceId, seq: take.workspace.seq });
    if (job.type === 'apply_patch') return { verdict: await this.applyPatch(job) };
    // Every other job type is staged (contract/job-types.ts): pinned here, run by its stage consumer.
    const pin = await this.pin(job, take.workspace);
    await ledger.finishWorkspaceJob({ workspaceId: job.workspaceId, jobId: job.jobId, now: clock.now() });
    return { verdict: { status: 'FORWARDED', pin } };
  }

  private async skip(job: JobEnvelope, take: Exclude<SettledTake, { kind: 'taken' }>, ctx: JobContext): Promise<RunVerdict> {
    const { ledger, clock } = this.deps;
    let blockedBy = take.workspace.blockedBy ?? 'unknown';
    if (take.kind === 'predecessorUnfinished') {
      blockedBy = take.predecessor;
      ctx.logger.error('previous job left the queue unfinished: fencing the workspace', { predecessor: blockedBy });
      await this.fence(job.workspaceId, blockedBy, 'PREDECESSOR_UNFINISHED');
    }
    // Skipped jobs get a place in the workspace's order too, so a replay can follow it.
    ctx.placeInWorkspace({ workspaceId: job.workspaceId, seq: await ledger.nextWorkspaceSeq(job.workspaceId, clock.now()) });
    return { status: 'SKIPPED', blockedBy, error: { reason: SKIPPED_REASON, message: `workspace ${job.workspaceId} is blocked by job ${blockedBy}` } };
  }

  private async applyPatch(job: JobEnvelope<'apply_patch'>): Promise<{ status: 'SUCCEEDED'; result: Record<string, unknown> }> {
    const { payload } = job;
    const diff = payload.diff ?? (payload.diffRef ? await this.deps.diffStore.get(payload.diffRef) : undefined);
    if (diff === undefined) throw new PermanentJobError('INVALID_JOB', 'apply_patch has neither diff nor diffRef');
    const applied = await this.deps.git.applyPatchCommit({
      repoUrl: payload.repo.url,
      branch: payload.repo.branch,
      diff,
      baseSha: payload.baseSha,
      jobId: job.jobId,
      message: payload.message,
      author: payload.author,
      createdAt: job.createdAt,
      auth: await this.deps.secrets.gitCredentials(),
      workDir: await this.workDir(),
    });
    // Head and cursor in one write, before the ledger completes: a redelivery finds the commit anyway.
    await this.deps.ledger.finishWorkspaceJob({ workspaceId: job.workspaceId, jobId: job.jobId, head: applied.commitSha, now: this.deps.clock.now() });
    return { status: 'SUCCEEDED', result: { commitSha: applied.commitSha, alreadyApplied: applied.alreadyApplied } };
  }

  private async workDir(): Promise<string> {
    await mkdir(this.deps.workRoot, { recursive: true });
    return this.deps.workRoot;
  }

  /** The commit a staged job runs at: the head the last apply_patch recorded, else the branch head. */
  private async pin(job: JobEnvelope, workspace: WorkspaceRecord): Promise<Pin> {
    if (!workspace.repo) throw new PermanentJobError('WORKSPACE_UNKNOWN', `workspace ${job.workspaceId} has no repository yet: send an apply_patch first`);
    const sha = workspace.head ?? (await this.deps.git.resolveBranchHead(workspace.repo.url, workspace.repo.branch, await this.deps.secrets.gitCredentials()));
    if (!sha) throw new PermanentJobError('WORKSPACE_UNKNOWN', `branch ${workspace.repo.branch} of workspace ${job.workspaceId} does not exist`);
    return { sha, repoUrl: workspace.repo.url, branch: workspace.repo.branch };
  }

  /** Forwards a pinned job; runs again for a redelivered FORWARDED job, always with the recorded pin. */
  async afterComplete(job: JobEnvelope, record: JobRecord): Promise<void> {
    if (record.status !== 'FORWARDED' || !record.pin) return;
    const type = job.type as StagedJobType;
    await this.deps.queueOps.send(this.deps.stageQueueUrls[type], JSON.stringify({ ...job, pin: record.pin }), jobAttributes(job));
  }

  async onPermanentFailure(job: JobEnvelope, error: PermanentJobError, held: boolean): Promise<void> {
    // A conflict belongs to the original job with that id, not to this delivery.
    if (error.reason === 'CONFLICT') return;
    if (fencesOnFailure(job, error, held)) return this.fence(job.workspaceId, job.jobId, error.reason);
    if (!held) return;
    await this.deps.ledger.finishWorkspaceJob({ workspaceId: job.workspaceId, jobId: job.jobId, now: this.deps.clock.now() }).catch((e: unknown) => {
      // The job failed before it took the cursor: nothing to release.
      if (!(e instanceof LeaseLostError)) throw e;
    });
  }

  private async fence(workspaceId: string, blockedBy: string, reason: string): Promise<void> {
    await this.deps.ledger.blockWorkspace({ workspaceId, blockedBy, reason, now: this.deps.clock.now() });
    this.deps.metrics.count('WorkspaceBlocked');
    this.deps.logger.warn('workspace blocked', { workspaceId, blockedBy, reason });
    await this.deps.events.publish('WorkspaceBlocked', { workspaceId, blockedBy, reason });
  }
}

/** The Lambda handler over injected adapters: AWS ones below, local ones from the local platform. */
export function createSequencer(deps: SequencerDeps): (event: SQSEvent) => Promise<SQSBatchResponse> {
  const process = createRecordProcessor(new SequencerProcessor(deps), deps);
  const release = (record: SQSEvent['Records'][number]) => deps.queueOps.changeVisibility(record, 0);
  return (event) => processFifoBatch(event.Records, process, release);
}

/** Stage queue URLs from STAGE_QUEUE_URL_<TYPE>. */
export function stageQueueUrlsFromEnv(read: (name: string) => string): Record<StagedJobType, string> {
  const staged = (Object.keys(JOB_TYPES) as (keyof typeof JOB_TYPES)[]).filter((t): t is StagedJobType => JOB_TYPES[t].lane === 'staged');
  return Object.fromEntries(staged.map((type) => [type, read(stageQueueUrlEnv(type))])) as Record<StagedJobType, string>;
}

/** Lambda's writable scratch space. */
export const SEQUENCER_WORK_ROOT = path.join(os.tmpdir(), 'agent-jobs');

/** The AWS adapters, configured from the environment the stack sets (ConfigurationError names a missing one). */
export function awsSequencerDeps(env: NodeJS.ProcessEnv = process.env): SequencerDeps {
  const read = (name: string) => requireEnv(name, env);
  return {
    ...awsPipelineDeps('sequencer', SEQUENCER, env),
    diffStore: new S3DiffStore(awsClients.s3(), read(ENV.diffBucket)),
    git: { applyPatchCommit: (input) => gitAdapter.applyPatchCommit(input, { logger }), resolveBranchHead: gitAdapter.resolveBranchHead },
    secrets: new SecretsManagerSecrets({ client: awsClients.secretsManager(), gitCredentialsArn: read(ENV.gitCredentialsSecretArn) }),
    stageQueueUrls: stageQueueUrlsFromEnv(read),
    workRoot: SEQUENCER_WORK_ROOT,
  };
}

let sequencer: ((event: SQSEvent) => Promise<SQSBatchResponse>) | undefined;

/** Built on the first invocation of the container (not at import, so tests can import createSequencer). */
export const handler = (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
  logger.addContext(context);
  return (sequencer ??= createSequencer(awsSequencerDeps()))(event);
};
