/**
 * The ledger on DynamoDB (single table, `pk = job#<jobId>` / `ws#<workspaceId>`). Every state
 * change is one conditional write; when a condition fails the record is read with a consistent
 * read, because dynalite (local) does not return the old item on ConditionalCheckFailed. No
 * transactions, for the same reason. What a record means is decided in src/core/ledger.ts.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, QueryCommand, ScanCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { LEDGER_TABLE } from '../../contract/topology';
import type { Pin } from '../core/envelope';
import { LeaseLostError, TransientJobError } from '../core/errors';
import { byCreation, claimOutcome, RERUN_STATUSES, takeoverStatuses, ttlFor, workspaceTakeOutcome } from '../core/ledger';
import { UNFINISHED_STATUSES, type JobRecord, type WorkspaceRecord, type CancelOutcome, type ClaimRequest, type CompleteInput, type Ledger, type SettledClaim, type SettledTake, type TakeWorkspaceInput } from '../core/ports';

export interface DynamoLedgerOptions {
  readonly client: DynamoDBDocumentClient;
  readonly tableName: string;
  readonly retentionDays: number;
}

const jobKey = (jobId: string) => ({ pk: `job#${jobId}` });
const wsKey = (workspaceId: string) => `ws#${workspaceId}`;
/** A refused write followed by a read that finds the record claimable again is retried this often. */
const MAX_RACE_RETRIES = 3;

/** Attributes that are ours (key, index) and not part of the JobRecord / WorkspaceRecord contract. */
function strip<T>(item: Record<string, unknown> | undefined): T | undefined {
  if (item === undefined) return undefined;
  const { pk: _pk, wsKey: _wsKey, ...rest } = item;
  return rest as T;
}

/** The record holds exactly this pin; a claim without a pin gets a condition no record meets. */
function pinCondition(pin: Pin | undefined): { expression: string; names: Record<string, string>; values: Record<string, unknown> } {
  if (pin === undefined) return { expression: 'attribute_exists(pk) AND attribute_not_exists(pk)', names: {}, values: {} };
  return {
    expression: '#pin.#sha = :pinSha AND #pin.#repoUrl = :pinRepoUrl AND #pin.#branch = :pinBranch',
    names: { '#pin': 'pin', '#sha': 'sha', '#repoUrl': 'repoUrl', '#branch': 'branch' },
    values: { ':pinSha': pin.sha, ':pinRepoUrl': pin.repoUrl, ':pinBranch': pin.branch },
  };
}

function isConditionFailure(error: unknown): boolean {
  return error instanceof ConditionalCheckFailedException || (error instanceof Error && error.name === 'ConditionalCheckFailedException');
}

export class DynamoDbLedger implements Ledger {
  private readonly client: DynamoDBDocumentClient;
  private readonly table: string;
  private readonly retentionDays: number;

  constructor(options: DynamoLedgerOptions) {
    this.client = options.client;
    this.table = options.tableName;
    this.retentionDays = options.retentionDays;
  }

  async claim(req: ClaimRequest): Promise<SettledClaim> {
    for (let attempt = 0; attempt < MAX_RACE_RETRIES; attempt++) {
      // A redrive's takeover of a finished record is a second write: it also drops the old run's progress.
      const written = (await this.tryClaim(req, false)) ?? (req.redrive ? await this.tryClaim(req, true) : undefined);
      if (written) return { kind: 'claimed', record: written };
      const outcome = claimOutcome(await this.getJob(req.job.jobId), req);
      if (outcome.kind !== 'retry') return outcome;
    }
    throw new TransientJobError(`claim of job ${req.job.jobId} kept racing with other writers`);
  }

  /**
   * One conditional write. The ordinary claim takes a new record, an expired lease or a record handed
   * over (isClaimable); a rerun takes only a FAILED or SKIPPED record and starts the job afresh.
   */
  private async tryClaim(req: ClaimRequest, rerun: boolean): Promise<JobRecord | undefined> {
    const { job } = req;
    const takeover = rerun ? RERUN_STATUSES : takeoverStatuses(req.consumer, false);
    const takeoverValues = Object.fromEntries(takeover.map((s, i) => [`:t${i}`, s]));
    const statusIn = `#status IN (${Object.keys(takeoverValues).join(', ')})`;
    const leaseExpired = '#status = :inFlight AND (attribute_not_exists(leaseUntil) OR leaseUntil <= :nowMs)';
    const takeable = takeover.length ? `(${leaseExpired}) OR ${statusIn}` : leaseExpired;
    // The sequencer never claims a pinned job back from its stage (isClaimable).
    const sameRequest = req.consumer === 'sequencer' ? 'digest = :digest AND attribute_not_exists(pin)' : 'digest = :digest';
    const same = rerun ? `${sameRequest} AND ${statusIn}` : `${sameRequest} AND (${takeable})`;
    const pinned = req.consumer === 'stage' ? pinCondition(req.pin) : undefined;
    // A stage consumer never creates a record: it takes only one the sequencer pinned (unpinnedReason).
    const condition = pinned ? `${pinned.expression} AND ${same}` : rerun ? same : `attribute_not_exists(pk) OR (${same})`;
    try {
      const out = await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(job.jobId),
          UpdateExpression:
            'SET #status = :inFlight, leaseOwner = :owner, leaseUntil = :until, jobId = :jobId, workspaceId = :ws, ' +
            'tenantId = :tenant, #type = :type, digest = :digest, createdAt = if_not_exists(createdAt, :createdAt), ' +
            `updatedAt = :now, #ttl = :ttl ADD attempt :one REMOVE #error, blockedBy${rerun ? ', progress' : ''}`,
          ConditionExpression: condition,
          ExpressionAttributeNames: { '#status': 'status', '#type': 'type', '#ttl': LEDGER_TABLE.ttlAttribute, '#error': 'error', ...pinned?.names },
          ExpressionAttributeValues: {
            ':inFlight': 'IN_FLIGHT',
            ':owner': req.owner,
            ':until': req.now + req.leaseMs,
            ':jobId': job.jobId,
            ':ws': job.workspaceId,
            ':tenant': job.tenantId,
            ':type': job.type,
            ':digest': req.digest,
            ':createdAt': job.createdAt,
            ':now': new Date(req.now).toISOString(),
            ...(rerun ? {} : { ':nowMs': req.now }),
            ':ttl': ttlFor(req.now, this.retentionDays),
            ':one': 1,
            ...takeoverValues,
            ...pinned?.values,
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return strip<JobRecord>(out.Attributes);
    } catch (error) {
      if (isConditionFailure(error)) return undefined;
      throw error;
    }
  }

  async complete(input: CompleteInput): Promise<JobRecord> {
    const { verdict } = input;
    const names: Record<string, string> = { '#status': 'status' };
    const values: Record<string, unknown> = { ':status': verdict.status, ':owner': input.owner, ':inFlight': 'IN_FLIGHT', ':now': new Date(input.now).toISOString() };
    const sets = ['#status = :status', 'updatedAt = :now'];
    const set = (attr: string, value: unknown) => {
      names[`#${attr}`] = attr;
      values[`:${attr}`] = value;
      sets.push(`#${attr} = :${attr}`);
    };
    if (verdict.status === 'SUCCEEDED') set('result', verdict.result);
    if (verdict.status === 'FAILED' || verdict.status === 'SKIPPED') set('error', verdict.error);
    if (verdict.status === 'SKIPPED') set('blockedBy', verdict.blockedBy);
    if (verdict.status === 'FORWARDED') set('pin', verdict.pin);
    if (input.workspace) {
      set('wsKey', wsKey(input.workspace.workspaceId));
      set('wsSeq', input.workspace.seq);
    }
    try {
      const out = await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(input.jobId),
          UpdateExpression: `SET ${sets.join(', ')} REMOVE leaseUntil`,
          ConditionExpression: '#status = :inFlight AND leaseOwner = :owner',
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ReturnValues: 'ALL_NEW',
        }),
      );
      return strip<JobRecord>(out.Attributes) as JobRecord;
    } catch (error) {
      if (isConditionFailure(error)) throw new LeaseLostError(`job ${input.jobId}: lease of ${input.owner} was taken over before completion`);
      throw error;
    }
  }

  async heartbeat(input: { jobId: string; owner: string; leaseUntil: number; now: number }): Promise<void> {
    await this.fencedUpdate(input.jobId, input.owner, 'leaseUntil = :until, updatedAt = :now', {
      ':until': input.leaseUntil,
      ':now': new Date(input.now).toISOString(),
    });
  }

  async release(input: { jobId: string; owner: string; now: number }): Promise<void> {
    await this.fencedUpdate(input.jobId, input.owner, 'leaseUntil = :until, updatedAt = :now', {
      ':until': input.now,
      ':now': new Date(input.now).toISOString(),
    });
  }

  async recordProgress(input: { jobId: string; owner: string; progress: Record<string, string>; now: number }): Promise<void> {
    await this.fencedUpdate(input.jobId, input.owner, 'progress = :progress, updatedAt = :now', {
      ':progress': input.progress,
      ':now': new Date(input.now).toISOString(),
    });
  }

  private async fencedUpdate(jobId: string, owner: string, setExpression: string, values: Record<string, unknown>): Promise<void> {
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(jobId),
          UpdateExpression: `SET ${setExpression}`,
          ConditionExpression: '#status = :inFlight AND leaseOwner = :owner',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ...values, ':inFlight': 'IN_FLIGHT', ':owner': owner },
        }),
      );
    } catch (error) {
      if (isConditionFailure(error)) throw new LeaseLostError(`job ${jobId}: lease of ${owner} was taken over`);
      throw error;
    }
  }

  async getJob(jobId: string): Promise<JobRecord | undefined> {
    const out = await this.client.send(new GetCommand({ TableName: this.table, Key: jobKey(jobId), ConsistentRead: true }));
    return strip<JobRecord>(out.Item);
  }

  async getWorkspace(workspaceId: string): Promise<WorkspaceRecord | undefined> {
    const out = await this.client.send(new GetCommand({ TableName: this.table, Key: { pk: wsKey(workspaceId) }, ConsistentRead: true }));
    return strip<WorkspaceRecord>(out.Item);
  }

  async listWorkspaceJobs(workspaceId: string): Promise<JobRecord[]> {
    const index = LEDGER_TABLE.workspaceIndex;
    const jobs: JobRecord[] = [];
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.client.send(
        new QueryCommand({
          TableName: this.table,
          IndexName: index.name,
          KeyConditionExpression: '#k = :k',
          ExpressionAttributeNames: { '#k': index.partitionKey },
          ExpressionAttributeValues: { ':k': wsKey(workspaceId) },
          ScanIndexForward: true,
          ExclusiveStartKey: startKey,
        }),
      );
      for (const item of out.Items ?? []) jobs.push(strip<JobRecord>(item) as JobRecord);
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    return jobs;
  }

  async listUnfinished(): Promise<JobRecord[]> {
    const statuses = Object.fromEntries(UNFINISHED_STATUSES.map((s, i) => [`:s${i}`, s]));
    const jobs: JobRecord[] = [];
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.client.send(
        new ScanCommand({
          TableName: this.table,
          ConsistentRead: true,
          FilterExpression: `begins_with(pk, :job) AND #status IN (${Object.keys(statuses).join(', ')})`,
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':job': 'job#', ...statuses },
          ExclusiveStartKey: startKey,
        }),
      );
      for (const item of out.Items ?? []) jobs.push(strip<JobRecord>(item) as JobRecord);
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    return jobs.sort(byCreation);
  }

  async cancel(jobId: string, now: number): Promise<CancelOutcome> {
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(jobId),
          // A tombstone for a job not seen yet: no digest, so its later delivery is a no-op (claimOutcome).
          UpdateExpression:
            'SET #status = :cancelled, jobId = :jobId, attempt = if_not_exists(attempt, :zero), digest = if_not_exists(digest, :none), ' +
            'createdAt = if_not_exists(createdAt, :now), updatedAt = :now, #ttl = :ttl',
          ConditionExpression: 'attribute_not_exists(pk) OR #status = :skipped',
          ExpressionAttributeNames: { '#status': 'status', '#ttl': LEDGER_TABLE.ttlAttribute },
          ExpressionAttributeValues: {
            ':cancelled': 'CANCELLED',
            ':skipped': 'SKIPPED',
            ':jobId': jobId,
            ':zero': 0,
            ':none': '',
            ':now': new Date(now).toISOString(),
            ':ttl': ttlFor(now, this.retentionDays),
          },
        }),
      );
      return { cancelled: true };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      const record = await this.getJob(jobId);
      if (record === undefined) return this.cancel(jobId, now);
      return { cancelled: false, record };
    }
  }

  async takeWorkspace(input: TakeWorkspaceInput): Promise<SettledTake> {
    for (let attempt = 0; attempt < MAX_RACE_RETRIES; attempt++) {
      try {
        const out = await this.client.send(
          new UpdateCommand({
            TableName: this.table,
            Key: { pk: wsKey(input.workspaceId) },
            UpdateExpression:
              'SET seq = if_not_exists(seq, :zero) + :one, currentJobId = :job, currentDone = :false, ' +
              `#state = if_not_exists(#state, :active), workspaceId = :ws, updatedAt = :now${input.repo ? ', #repo = if_not_exists(#repo, :repo)' : ''}`,
            ConditionExpression:
              'attribute_not_exists(pk) OR (#state = :active AND (attribute_not_exists(currentDone) OR currentDone = :true)' +
              // Bound by the first job: a job naming another repository or branch never takes the cursor (matchesBinding).
              `${input.repo ? ' AND (attribute_not_exists(#repo) OR (#repo.#url = :repoUrl AND #repo.#branch = :repoBranch))' : ''})`,
            ExpressionAttributeNames: { '#state': 'state', ...(input.repo ? { '#repo': 'repo', '#url': 'url', '#branch': 'branch' } : {}) },
            ExpressionAttributeValues: {
              ':zero': 0,
              ':one': 1,
              ':job': input.jobId,
              ':false': false,
              ':true': true,
              ':active': 'ACTIVE',
              ':ws': input.workspaceId,
              ':now': new Date(input.now).toISOString(),
              ...(input.repo ? { ':repo': input.repo, ':repoUrl': input.repo.url, ':repoBranch': input.repo.branch } : {}),
            },
            ReturnValues: 'ALL_NEW',
          }),
        );
        return { kind: 'taken', workspace: strip<WorkspaceRecord>(out.Attributes) as WorkspaceRecord };
      } catch (error) {
        if (!isConditionFailure(error)) throw error;
      }
      const outcome = workspaceTakeOutcome(await this.getWorkspace(input.workspaceId), input.jobId, input.repo);
      if (outcome.kind !== 'retry') return outcome;
    }
    throw new TransientJobError(`workspace ${input.workspaceId}: cursor kept racing with other writers`);
  }

  async nextWorkspaceSeq(workspaceId: string, now: number): Promise<number> {
    const out = await this.client.send(
      new UpdateCommand({
        TableName: this.table,
        Key: { pk: wsKey(workspaceId) },
        UpdateExpression: 'SET seq = if_not_exists(seq, :zero) + :one, updatedAt = :now',
        ExpressionAttributeValues: { ':zero': 0, ':one': 1, ':now': new Date(now).toISOString() },
        ReturnValues: 'UPDATED_NEW',
      }),
    );
    return Number(out.Attributes?.['seq']);
  }

  async finishWorkspaceJob(input: { workspaceId: string; jobId: string; head?: string; now: number }): Promise<void> {
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { pk: wsKey(input.workspaceId) },
          UpdateExpression: `SET currentDone = :true, updatedAt = :now${input.head ? ', head = :head' : ''}`,
          ConditionExpression: 'currentJobId = :job',
          ExpressionAttributeValues: {
            ':true': true,
            ':job': input.jobId,
            ':now': new Date(input.now).toISOString(),
            ...(input.head ? { ':head': input.head } : {}),
          },
        }),
      );
    } catch (error) {
      if (isConditionFailure(error)) throw new LeaseLostError(`workspace ${input.workspaceId}: cursor no longer on job ${input.jobId}`);
      throw error;
    }
  }

  async blockWorkspace(input: { workspaceId: string; blockedBy: string; reason: string; now: number }): Promise<void> {
    // Unconditional: fencing is always safe; the cursor counts as settled by the fence.
    await this.client.send(
      new UpdateCommand({
        TableName: this.table,
        Key: { pk: wsKey(input.workspaceId) },
        UpdateExpression:
          'SET #state = :blocked, blockedBy = :by, blockedReason = :reason, currentDone = :true, ' +
          'seq = if_not_exists(seq, :zero), workspaceId = :ws, updatedAt = :now',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: {
          ':blocked': 'BLOCKED',
          ':by': input.blockedBy,
          ':reason': input.reason,
          ':true': true,
          ':zero': 0,
          ':ws': input.workspaceId,
          ':now': new Date(input.now).toISOString(),
        },
      }),
    );
  }

  async unblockWorkspace(workspaceId: string, now: number): Promise<WorkspaceRecord> {
    const out = await this.client.send(
      new UpdateCommand({
        TableName: this.table,
        Key: { pk: wsKey(workspaceId) },
        UpdateExpression: 'SET #state = :active, currentDone = :true, updatedAt = :now REMOVE blockedBy, blockedReason',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: { ':active': 'ACTIVE', ':true': true, ':now': new Date(now).toISOString() },
        ReturnValues: 'ALL_NEW',
      }),
    );
    return strip<WorkspaceRecord>(out.Attributes) as WorkspaceRecord;
  }
}
