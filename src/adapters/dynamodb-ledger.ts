/**
 * The ledger on DynamoDB (single table, `pk = job#<jobId>` / `ws#<workspaceId>`). Every state
 * change is one conditional write. A refused write whose refusal must be explained (a claim, a
 * completion, the cursor, a resend, a cancel) asks for the item its condition saw
 * (ReturnValuesOnConditionCheckFailure ALL_OLD): DynamoDB returns it with the refusal, atomically
 * and at no read cost, so a duplicate (finished or in flight) or a conflict costs one write, and a
 * refused claim sees the record exactly as its condition did. Only when the refusal comes
 * without it is the item read, with a consistent read: dynalite (the default local emulator)
 * returns none, and there is none to return when the item does not exist. Writes whose refusal
 * needs no look at the item (a fenced heartbeat, a marker already set) do not ask for it. No
 * transactions: dynalite lacks them. What a record means is decided in src/core/ledger.ts.
 */
import { randomUUID } from 'node:crypto';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  GetCommand,
  PutCommand,
  QueryCommand,
  ScanCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
} from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import * as z from 'zod/mini';
import { COMMAND_JOB_TYPES, JOB_TYPE_NAMES, type JobType } from '../../contract/job-types';
import { LEDGER_TABLE } from '../../contract/topology';
import type { JobEnvelope, Pin } from '../core/envelope';
import { LeaseLostError, TransientJobError } from '../core/errors';
import {
  branchBindingKey,
  byCreation,
  cancelRule,
  claimOutcome,
  conflictEntry,
  isCompletionOf,
  isStaleBinding,
  LISTS,
  listSortKey,
  queuedRecord,
  MAX_CONFLICTS,
  RERUN_STATUSES,
  takeoverStatuses,
  ttlFor,
  workspaceTakeOutcome,
} from '../core/ledger';
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
  type JobRecord,
  type JobStatus,
  type Ledger,
  type QueueOutcome,
  type FinishBuildInput,
  type FinishBuildOutcome,
  type SettledClaim,
  type SettledTake,
  type TakeWorkspaceInput,
  type WorkspacePage,
  type WorkspacePageRequest,
  type WorkspaceRecord,
} from '../core/ports';

export interface DynamoLedgerOptions {
  readonly client: DynamoDBDocumentClient;
  readonly tableName: string;
  readonly retentionDays: number;
}

type Item = Record<string, unknown>;

const jobKey = (jobId: string) => ({ pk: `job#${jobId}` });
const wsKey = (workspaceId: string) => `ws#${workspaceId}`;
const conflictKey = (jobId: string) => ({ pk: `conflict#${jobId}` });
/** The one partition of the sparse due index (LEDGER_TABLE.dueIndex): set while a job is due. */
const DUE = 'due';
/**
 * What a rerun (an operator's redrive of a FAILED or SKIPPED job) drops with the old run: its
 * progress (a broken build's id) and the build-completion state; it also adds one to `run`.
 */
const RERUN_REMOVES = ', progress, dueKey, dueAt, stageMessage, reportedAt, #result, redriveToken';
/** One of cancel's conditional writes: the condition encodes a case of cancelRule (src/core/ledger.ts). */
interface CancelWrite {
  readonly condition: string;
  readonly names?: Record<string, string>;
  readonly values: Record<string, unknown>;
  /** `leave its list`: off the workspace's open list (and the DLQ list of a SKIPPED job). */
  readonly list: 'keep its list' | 'leave its list';
  /** Stays on the due index, so the reconciler stops its build (markBuildStopped ends it). */
  readonly due: boolean;
}

const COMMAND_TYPE_VALUES = Object.fromEntries(COMMAND_JOB_TYPES.map((type, i) => [`:cmd${i}`, type]));

const CANCEL_WRITES = {
  queued: { condition: '#status = :queued', values: { ':queued': 'QUEUED' }, list: 'keep its list', due: false },
  notStarted: {
    condition: '#status IN (:forwarded, :skipped)',
    values: { ':forwarded': 'FORWARDED', ':skipped': 'SKIPPED' },
    list: 'leave its list',
    due: false,
  },
  // cancelRule's stopBuild: a command stage's pinned job, RUNNING, or IN_FLIGHT with its build
  // recorded or with no live lease (nobody is starting a build it could not name).
  stopBuild: {
    condition:
      `attribute_exists(pin) AND #type IN (${Object.keys(COMMAND_TYPE_VALUES).join(', ')}) AND (#status = :running OR ` +
      '(#status = :inFlight AND (attribute_exists(progress.buildId) OR attribute_not_exists(leaseUntil) OR leaseUntil <= :nowMs)))',
    names: { '#type': 'type' },
    values: { ':running': 'RUNNING', ':inFlight': 'IN_FLIGHT', ...COMMAND_TYPE_VALUES },
    list: 'leave its list',
    due: true,
  },
} as const satisfies Record<string, CancelWrite>;

/** Spread into a conditional write whose refusal is explained from the item it was refused on. */
const OLD_ITEM_ON_REFUSAL = { ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } as const;
/** A refused write whose item (returned or read) is claimable again is retried this often. */
const MAX_RACE_RETRIES = 3;
/** BatchGetItem takes at most 100 keys; unprocessed keys are asked again this often. */
const BATCH_GET_KEYS = 100;
const BATCH_GET_ROUNDS = 5;

/** Attributes that are ours (keys, indexes) and not part of the JobRecord / WorkspaceRecord contract. */
function strip<T>(item: Record<string, unknown> | undefined): T | undefined {
  if (item === undefined) return undefined;
  const {
    pk: _pk,
    wsKey: _wsKey,
    listKey: _listKey,
    listSort: _listSort,
    dueKey: _dueKey,
    finishedBy: _finishedBy,
    ...rest
  } = item;
  return rest as T;
}

/** The record holds exactly this pin; a claim without a pin gets a condition no record meets. */
function pinCondition(pin: Pin | undefined): {
  expression: string;
  names: Record<string, string>;
  values: Record<string, unknown>;
} {
  if (pin === undefined)
    return { expression: 'attribute_exists(pk) AND attribute_not_exists(pk)', names: {}, values: {} };
  return {
    expression: '#pin.#sha = :pinSha AND #pin.#repoUrl = :pinRepoUrl AND #pin.#branch = :pinBranch',
    names: { '#pin': 'pin', '#sha': 'sha', '#repoUrl': 'repoUrl', '#branch': 'branch' },
    values: { ':pinSha': pin.sha, ':pinRepoUrl': pin.repoUrl, ':pinBranch': pin.branch },
  };
}

/** A conflict record read back from the table (written by recordConflict). */
const conflictItemSchema = z.object({
  attempts: z.array(
    z.object({
      jobId: z.string(),
      workspaceId: z.string(),
      tenantId: z.string(),
      type: z.enum(JOB_TYPE_NAMES as [JobType, ...JobType[]]),
      at: z.string(),
      seenBy: z.enum(['enqueue', 'sequencer', 'stage']),
    }),
  ),
});

function conflictAttempts(item: Record<string, unknown> | undefined, jobId: string): ConflictAttempt[] {
  if (item === undefined) return [];
  const parsed = conflictItemSchema.safeParse(item);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`ledger record conflict#${jobId} is malformed: ${problems}`);
  }
  return parsed.data.attempts;
}

function isConditionFailure(error: unknown): boolean {
  return (
    error instanceof ConditionalCheckFailedException ||
    (error instanceof Error && error.name === 'ConditionalCheckFailedException')
  );
}

/** The workspace and the job holding a branch binding, from its item; none for a released one. */
function holderOf(item: Item | undefined): { workspaceId: string; jobId: string } | undefined {
  return item?.['workspaceId'] === undefined
    ? undefined
    : { workspaceId: String(item['workspaceId']), jobId: String(item['jobId']) };
}

/** A conditional write DynamoDB refused, with the item its condition saw when the refusal carries it. */
interface Refusal {
  readonly kind: 'refused';
  readonly item: Item | undefined;
}

/**
 * The refusal of a conditional write that asked for OLD_ITEM_ON_REFUSAL. The document client
 * leaves the refusal's item in attribute-value form (`{ pk: { S: ... } }`): it is unmarshalled as
 * the client unmarshalls what it reads. Every item has a string `pk`, so an item already
 * unmarshalled (by an SDK that does it itself) is recognised and taken as it is.
 */
function refusal(error: unknown, client: DynamoDBDocumentClient): Refusal {
  const item = (error as { Item?: Item }).Item;
  if (item === undefined || typeof item['pk'] === 'string') return { kind: 'refused', item };
  return {
    kind: 'refused',
    item: unmarshall(item as Parameters<typeof unmarshall>[0], client.config.translateConfig?.unmarshallOptions),
  };
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
      let claim = await this.tryClaim(req, false);
      // A redrive's takeover of a finished record is a second write: it also drops the old run's progress.
      if (claim.kind === 'refused' && req.redriveToken !== undefined) claim = await this.tryClaim(req, true);
      if (claim.kind === 'claimed') return claim;
      // The record as the refusing condition saw it; read only when the refusal came without it.
      const outcome = claimOutcome(strip<JobRecord>(claim.item ?? (await this.getJobItem(req.job.jobId))), req);
      if (outcome.kind !== 'retry') return outcome;
    }
    throw new TransientJobError(`claim of job ${req.job.jobId} kept racing with other writers`);
  }

  /**
   * One conditional write. The ordinary claim takes a new record, an expired lease or a record handed
   * over (isClaimable); a rerun takes only a FAILED or SKIPPED record and starts the job afresh.
   */
  private async tryClaim(req: ClaimRequest, rerun: boolean): Promise<{ kind: 'claimed'; record: JobRecord } | Refusal> {
    const { job } = req;
    const takeover = rerun ? RERUN_STATUSES : takeoverStatuses(req.consumer);
    const takeoverValues = Object.fromEntries(takeover.map((s, i) => [`:t${i}`, s]));
    const statusIn = `#status IN (${Object.keys(takeoverValues).join(', ')})`;
    const leaseExpired = '#status = :inFlight AND (attribute_not_exists(leaseUntil) OR leaseUntil <= :nowMs)';
    const takeable = `#status = :queued OR (${leaseExpired})${takeover.length ? ` OR ${statusIn}` : ''}`;
    // The sequencer never claims a pinned job back from its stage (isClaimable).
    const sameRequest =
      req.consumer === 'sequencer' ? 'digest = :digest AND attribute_not_exists(pin)' : 'digest = :digest';
    // A rerun is the operator's redrive only when the record holds the token it carries (isAuthorizedRerun).
    const same = rerun
      ? `${sameRequest} AND ${statusIn} AND redriveToken = :redriveToken`
      : `${sameRequest} AND (${takeable})`;
    const pinned = req.consumer === 'stage' ? pinCondition(req.pin) : undefined;
    // A stage consumer never creates a record: it takes only one the sequencer pinned (unpinnedReason).
    const condition = pinned
      ? `${pinned.expression} AND ${same}`
      : rerun
        ? same
        : `attribute_not_exists(pk) OR (${same})`;
    // The job is open (unfinished) from here on; a rerun moves it off the DLQ list.
    const openList = rerun
      ? 'listKey = :open, listSort = :openSort'
      : 'listKey = if_not_exists(listKey, :open), listSort = if_not_exists(listSort, :openSort)';
    try {
      const out = await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(job.jobId),
          UpdateExpression:
            'SET #status = :inFlight, leaseOwner = :owner, leaseUntil = :until, jobId = :jobId, workspaceId = :ws, ' +
            'tenantId = :tenant, #type = :type, digest = :digest, createdAt = if_not_exists(createdAt, :createdAt), ' +
            `startedAt = :now, updatedAt = :now, #ttl = :ttl, ${openList} ADD attempt :one${rerun ? ', #run :one' : ''} REMOVE #error, blockedBy${rerun ? RERUN_REMOVES : ''}`,
          ConditionExpression: condition,
          ExpressionAttributeNames: {
            '#status': 'status',
            '#type': 'type',
            '#ttl': LEDGER_TABLE.ttlAttribute,
            '#error': 'error',
            ...(rerun ? { '#run': 'run', '#result': 'result' } : {}),
            ...pinned?.names,
          },
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
            ...(rerun ? { ':redriveToken': req.redriveToken } : { ':nowMs': req.now, ':queued': 'QUEUED' }),
            ':ttl': ttlFor(req.now, this.retentionDays),
            ':open': LISTS.open(job.workspaceId),
            ':openSort': listSortKey(new Date(req.now).toISOString(), job.jobId),
            ':one': 1,
            ...takeoverValues,
            ...pinned?.values,
          },
          ReturnValues: 'ALL_NEW',
          ...OLD_ITEM_ON_REFUSAL,
        }),
      );
      return { kind: 'claimed', record: strip<JobRecord>(out.Attributes) as JobRecord };
    } catch (error) {
      if (isConditionFailure(error)) return refusal(error, this.client);
      // The write may have applied with its answer lost (a 500, a reset): then the lease is ours.
      const record = await this.getJob(job.jobId).catch(() => undefined);
      if (record?.status === 'IN_FLIGHT' && record.leaseOwner === req.owner) return { kind: 'claimed', record };
      throw error;
    }
  }

  async complete(input: CompleteInput): Promise<JobRecord> {
    const { verdict } = input;
    const names: Record<string, string> = { '#status': 'status' };
    const values: Record<string, unknown> = {
      ':status': verdict.status,
      ':owner': input.owner,
      ':inFlight': 'IN_FLIGHT',
      ':now': new Date(input.now).toISOString(),
    };
    const sets = ['#status = :status', 'updatedAt = :now'];
    const set = (attr: string, value: unknown) => {
      names[`#${attr}`] = attr;
      values[`:${attr}`] = value;
      sets.push(`#${attr} = :${attr}`);
    };
    if (verdict.status === 'SUCCEEDED') set('result', verdict.result);
    if (verdict.status === 'FAILED' || verdict.status === 'SKIPPED') set('error', verdict.error);
    if (verdict.status === 'SKIPPED') set('blockedBy', verdict.blockedBy);
    if (verdict.status === 'FORWARDED') {
      set('pin', verdict.pin);
      // Pinning is not an attempt at the job: its stage counts its own from 0.
      set('attempt', 0);
    }
    // The lists: FAILED and SKIPPED wait on a DLQ; FORWARDED is still open; SUCCEEDED is in none.
    const removes = ['leaseUntil'];
    if (verdict.status === 'FAILED' || verdict.status === 'SKIPPED') {
      set('listKey', LISTS.dlq);
      set('listSort', listSortKey(new Date(input.now).toISOString(), input.jobId));
    } else if (verdict.status === 'SUCCEEDED') {
      removes.push('listKey', 'listSort');
    }
    // RUNNING stays open too (on its workspace's list) until its build's completion.
    if (verdict.status === 'RUNNING') {
      set('dueKey', DUE);
      set('dueAt', verdict.dueAt);
      set('stageMessage', verdict.stageMessage);
    }
    if (input.workspace) {
      set('wsKey', wsKey(input.workspace.workspaceId));
      set('wsSeq', input.workspace.seq);
    }
    if (input.workspace?.previousSeq !== undefined) {
      // A job run again at a new turn keeps the turn it had: the timeline names it beside the new one.
      names['#earlierSeqs'] = 'earlierSeqs';
      values[':previousSeqs'] = [input.workspace.previousSeq];
      values[':noSeqs'] = [];
      sets.push('#earlierSeqs = list_append(if_not_exists(#earlierSeqs, :noSeqs), :previousSeqs)');
    }
    try {
      const out = await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(input.jobId),
          UpdateExpression: `SET ${sets.join(', ')} REMOVE ${removes.join(', ')}`,
          ConditionExpression: '#status = :inFlight AND leaseOwner = :owner',
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ReturnValues: 'ALL_NEW',
          ...OLD_ITEM_ON_REFUSAL,
        }),
      );
      return strip<JobRecord>(out.Attributes) as JobRecord;
    } catch (error) {
      // The write may have applied with its answer lost: a 500 after it, or the SDK's retry of it
      // refused by its own effect. The record then carries this very write: it is the caller's.
      const record = strip<JobRecord>(await this.itemAfter(error, input.jobId).catch(() => undefined));
      if (record !== undefined && isCompletionOf(record, input)) return record;
      if (isConditionFailure(error))
        throw new LeaseLostError(`job ${input.jobId}: lease of ${input.owner} was taken over before completion`);
      throw error;
    }
  }

  async finishBuild(input: FinishBuildInput): Promise<FinishBuildOutcome> {
    const { verdict } = input;
    const field = verdict.status === 'SUCCEEDED' ? 'result' : 'error';
    // The lists, as `complete` moves them: a failed job waits on the DLQ list, a succeeded one is in none.
    const lists = verdict.status === 'FAILED' ? ', listKey = :dlq, listSort = :dlqSort' : '';
    // Names this write, so a caller whose answer was lost can tell it from another completion's.
    const token = randomUUID();
    try {
      const out = await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(input.jobId),
          // Stays on the due index until reported, so the reconciler reports it if the reporter dies.
          UpdateExpression: `SET #status = :status, #field = :value, dueAt = :reportBy, updatedAt = :now, finishedBy = :token${lists}${verdict.status === 'SUCCEEDED' ? ' REMOVE listKey, listSort' : ''}`,
          ConditionExpression: '#status = :running AND progress.buildId = :buildId',
          ExpressionAttributeNames: { '#status': 'status', '#field': field },
          ExpressionAttributeValues: {
            ':status': verdict.status,
            ':value': verdict.status === 'SUCCEEDED' ? verdict.result : verdict.error,
            ':reportBy': input.reportBy,
            ':now': new Date(input.now).toISOString(),
            ':running': 'RUNNING',
            ':buildId': input.buildId,
            ':token': token,
            ...(verdict.status === 'FAILED'
              ? { ':dlq': LISTS.dlq, ':dlqSort': listSortKey(new Date(input.now).toISOString(), input.jobId) }
              : {}),
          },
          ReturnValues: 'ALL_NEW',
          ...OLD_ITEM_ON_REFUSAL,
        }),
      );
      return { kind: 'finished', record: strip<JobRecord>(out.Attributes) as JobRecord };
    } catch (error) {
      // As in `complete`: the write may have applied with its answer lost (a 500 after it, or the
      // SDK's retry refused by its own effect); a record carrying this write's token is the caller's to report.
      const item = await this.itemAfter(error, input.jobId);
      const record = strip<JobRecord>(item);
      if (record !== undefined && item?.['finishedBy'] === token) return { kind: 'finished', record };
      if (!isConditionFailure(error)) throw error;
      return { kind: 'refused', record };
    }
  }

  async markReported(input: { jobId: string; buildId: string; now: number }): Promise<void> {
    await this.client
      .send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(input.jobId),
          UpdateExpression: 'SET reportedAt = :now, updatedAt = :now REMOVE dueKey, dueAt',
          // Only this build's verdict: a redrive may have started a new run meanwhile.
          ConditionExpression: 'progress.buildId = :buildId',
          ExpressionAttributeValues: { ':now': new Date(input.now).toISOString(), ':buildId': input.buildId },
        }),
      )
      .catch((error: unknown) => {
        if (!isConditionFailure(error)) throw error;
      });
  }

  async postponeDue(input: { jobId: string; buildId: string; dueAt: number; now: number }): Promise<void> {
    await this.client
      .send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(input.jobId),
          UpdateExpression: 'SET dueAt = :dueAt, updatedAt = :now',
          ConditionExpression: '#status = :running AND progress.buildId = :buildId',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: {
            ':dueAt': input.dueAt,
            ':now': new Date(input.now).toISOString(),
            ':running': 'RUNNING',
            ':buildId': input.buildId,
          },
        }),
      )
      .catch((error: unknown) => {
        // Completed meanwhile: nothing to postpone.
        if (!isConditionFailure(error)) throw error;
      });
  }

  async listDue(now: number, limit: number): Promise<JobRecord[]> {
    const index = LEDGER_TABLE.dueIndex;
    const out = await this.client.send(
      new QueryCommand({
        TableName: this.table,
        IndexName: index.name,
        KeyConditionExpression: '#k = :due AND #at <= :now',
        ExpressionAttributeNames: { '#k': index.partitionKey, '#at': index.sortKey },
        ExpressionAttributeValues: { ':due': DUE, ':now': now },
        ScanIndexForward: true,
        Limit: limit,
      }),
    );
    // The index is eventually consistent (and an emulator killed mid-write can leave an entry of a
    // write that never reached the item): the records are read, and only those still due are listed.
    const listed = (out.Items ?? []).map((item) => String(item[LEDGER_TABLE.partitionKey]));
    const items = await this.getAll(listed);
    return items
      .filter((item) => item['dueKey'] === DUE && typeof item['dueAt'] === 'number' && item['dueAt'] <= now)
      .map((item) => strip<JobRecord>(item) as JobRecord);
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

  async recordProgress(input: {
    jobId: string;
    owner: string;
    progress: Record<string, string>;
    now: number;
  }): Promise<void> {
    await this.fencedUpdate(input.jobId, input.owner, 'progress = :progress, updatedAt = :now', {
      ':progress': input.progress,
      ':now': new Date(input.now).toISOString(),
    });
  }

  private async fencedUpdate(
    jobId: string,
    owner: string,
    setExpression: string,
    values: Record<string, unknown>,
  ): Promise<void> {
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
    return strip<JobRecord>(await this.getJobItem(jobId));
  }

  /** The job's item as stored, our own attributes included (a consistent read). */
  private async getJobItem(jobId: string): Promise<Item | undefined> {
    return this.getItem(jobKey(jobId).pk);
  }

  private async getItem(pk: string): Promise<Item | undefined> {
    const out = await this.client.send(new GetCommand({ TableName: this.table, Key: { pk }, ConsistentRead: true }));
    return out.Item;
  }

  /**
   * The job's item after a write of it failed: the item its condition refused when the refusal
   * carries it, else (no item with the refusal, or another error) the item as it stands now.
   */
  private async itemAfter(error: unknown, jobId: string): Promise<Item | undefined> {
    return (isConditionFailure(error) ? refusal(error, this.client).item : undefined) ?? (await this.getJobItem(jobId));
  }

  async getWorkspace(workspaceId: string): Promise<WorkspaceRecord | undefined> {
    return strip<WorkspaceRecord>(await this.getItem(wsKey(workspaceId)));
  }

  async listWorkspaceJobs(workspaceId: string): Promise<JobRecord[]> {
    const items = await this.queryIndex(LEDGER_TABLE.workspaceIndex, wsKey(workspaceId));
    return items.map((item) => strip<JobRecord>(item) as JobRecord);
  }

  async pageWorkspaceJobs(workspaceId: string, request: WorkspacePageRequest): Promise<WorkspacePage> {
    // One more than asked says whether more follow.
    const items = await this.queryIndex(LEDGER_TABLE.workspaceIndex, wsKey(workspaceId), {
      forward: request.order === 'oldest',
      after: request.after,
      atMost: request.limit + 1,
    });
    return {
      jobs: items.slice(0, request.limit).map((item) => strip<JobRecord>(item) as JobRecord),
      more: items.length > request.limit,
    };
  }

  /**
   * The items under one partition key of an index, in sort-key order (`forward`, or backwards),
   * after a sort key when given: every page of the query, or until `atMost` items. A page stops at
   * DynamoDB's 1 MB too (a few dozen test results with their log tails): the query goes on from there.
   */
  private async queryIndex(
    index: { name: string; partitionKey: string; sortKey?: string },
    key: string,
    options: { projection?: string; forward?: boolean; after?: number; atMost?: number } = {},
  ): Promise<Record<string, unknown>[]> {
    const forward = options.forward ?? true;
    const after = options.after !== undefined && index.sortKey ? ` AND #sort ${forward ? '>' : '<'} :after` : '';
    const items: Record<string, unknown>[] = [];
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.client.send(
        new QueryCommand({
          TableName: this.table,
          IndexName: index.name,
          KeyConditionExpression: `#k = :k${after}`,
          ExpressionAttributeNames: {
            '#k': index.partitionKey,
            ...(after ? { '#sort': index.sortKey as string } : {}),
          },
          ExpressionAttributeValues: { ':k': key, ...(after ? { ':after': options.after } : {}) },
          ProjectionExpression: options.projection,
          ScanIndexForward: forward,
          Limit: options.atMost === undefined ? undefined : options.atMost - items.length,
          ExclusiveStartKey: startKey,
        }),
      );
      items.push(...(out.Items ?? []));
      startKey = out.LastEvaluatedKey;
    } while (startKey && (options.atMost === undefined || items.length < options.atMost));
    return items;
  }

  async listUnfinished(): Promise<JobRecord[]> {
    return this.scanJobs(UNFINISHED_STATUSES);
  }

  async listFinishedSince(since: number): Promise<JobRecord[]> {
    return this.scanJobs(FINISHED_WITH_EVENT, since);
  }

  /** Every job in one of `statuses` (updated at or after `since`), oldest first: a full read of the table. */
  private async scanJobs(statuses: readonly JobStatus[], since?: number): Promise<JobRecord[]> {
    const values = Object.fromEntries(statuses.map((s, i) => [`:s${i}`, s]));
    const updated = since === undefined ? '' : ' AND updatedAt >= :since';
    const jobs: JobRecord[] = [];
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.client.send(
        new ScanCommand({
          TableName: this.table,
          ConsistentRead: true,
          FilterExpression: `begins_with(pk, :job) AND #status IN (${Object.keys(values).join(', ')})${updated}`,
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: {
            ':job': 'job#',
            ...values,
            ...(since === undefined ? {} : { ':since': new Date(since).toISOString() }),
          },
          ExclusiveStartKey: startKey,
        }),
      );
      for (const item of out.Items ?? []) jobs.push(strip<JobRecord>(item) as JobRecord);
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    return jobs.sort(byCreation);
  }

  async cancel(jobId: string, now: number): Promise<CancelOutcome> {
    // A QUEUED job keeps its place on its workspace's open list, the one list that shows it (ports.ts).
    let cancel = await this.cancelIf(jobId, CANCEL_WRITES.queued, now);
    for (let attempt = 0; cancel.kind === 'refused' && attempt < MAX_RACE_RETRIES; attempt++) {
      // The record as the refusing condition saw it decides the next write (cancelRule); a record
      // that changed in between refuses that one too, and is looked at again.
      const record = strip<JobRecord>(cancel.item ?? (await this.getJobItem(jobId)));
      const rule = record === undefined ? undefined : cancelRule(record, now);
      if (rule === undefined || rule.kind === 'refused') return { cancelled: false, record };
      cancel = await this.cancelIf(
        jobId,
        rule.kind === 'notStarted' ? CANCEL_WRITES.notStarted : CANCEL_WRITES.stopBuild,
        now,
      );
    }
    if (cancel.kind === 'cancelled') return cancel.outcome;
    return { cancelled: false, record: strip<JobRecord>(cancel.item ?? (await this.getJobItem(jobId))) };
  }

  /** Cancels the job if the write's condition holds; refused when it does not. */
  private async cancelIf(
    jobId: string,
    write: CancelWrite,
    now: number,
  ): Promise<{ kind: 'cancelled'; outcome: CancelOutcome } | Refusal> {
    const values: Record<string, unknown> = {
      ':cancelled': 'CANCELLED',
      ':now': new Date(now).toISOString(),
      ...(write.due ? { ':due': DUE, ':nowMs': now } : {}),
      ...write.values,
    };
    try {
      const out = await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(jobId),
          UpdateExpression: `SET #status = :cancelled, updatedAt = :now${write.due ? ', dueKey = :due, dueAt = :nowMs' : ''} REMOVE leaseUntil${write.list === 'leave its list' ? ', listKey, listSort' : ''}`,
          ConditionExpression: write.condition,
          ExpressionAttributeNames: { '#status': 'status', ...write.names },
          ExpressionAttributeValues: values,
          ReturnValues: 'ALL_OLD',
          ...OLD_ITEM_ON_REFUSAL,
        }),
      );
      const previous = strip<JobRecord>(out.Attributes) as JobRecord;
      const { leaseUntil: _leaseUntil, ...rest } = previous;
      const record: JobRecord = {
        ...rest,
        status: 'CANCELLED',
        updatedAt: new Date(now).toISOString(),
        ...(write.due ? { dueAt: now } : {}),
      };
      return { kind: 'cancelled', outcome: { cancelled: true, previous: previous.status, record } };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      return refusal(error, this.client);
    }
  }

  async markBuildStopped(input: { jobId: string; now: number }): Promise<void> {
    await this.client
      .send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(input.jobId),
          UpdateExpression: 'SET reportedAt = :now, updatedAt = :now REMOVE dueKey, dueAt',
          ConditionExpression: '#status = :cancelled',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':now': new Date(input.now).toISOString(), ':cancelled': 'CANCELLED' },
        }),
      )
      .catch((error: unknown) => {
        if (!isConditionFailure(error)) throw error;
      });
  }

  async authorizeRedrive(input: { jobId: string; token: string; now: number }): Promise<JobRecord | undefined> {
    try {
      const out = await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(input.jobId),
          // The record's updatedAt stays: it says when the job reached the DLQ (its list order).
          UpdateExpression: 'SET redriveToken = :token',
          ConditionExpression: '#status IN (:failed, :skipped) AND attribute_not_exists(dismissed)',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':token': input.token, ':failed': 'FAILED', ':skipped': 'SKIPPED' },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return strip<JobRecord>(out.Attributes);
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      return undefined;
    }
  }

  async dismiss(input: { jobId: string; dismissal: JobDismissal; now: number }): Promise<DismissOutcome> {
    try {
      const out = await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: jobKey(input.jobId),
          // updatedAt stays: it says when the job failed (a start's check of missed outcomes reads it).
          UpdateExpression: 'SET dismissed = :dismissal REMOVE listKey, listSort, redriveToken',
          ConditionExpression: '#status = :failed AND attribute_not_exists(dismissed) AND attribute_not_exists(dueAt)',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':dismissal': input.dismissal, ':failed': 'FAILED' },
          ReturnValues: 'ALL_NEW',
          ...OLD_ITEM_ON_REFUSAL,
        }),
      );
      return { kind: 'dismissed', record: strip<JobRecord>(out.Attributes) as JobRecord };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      const record = strip<JobRecord>(await this.itemAfter(error, input.jobId));
      return record?.dismissed !== undefined ? { kind: 'already', record } : { kind: 'refused', record };
    }
  }

  async recordQueued(input: { job: JobEnvelope; digest: string; now: number }): Promise<QueueOutcome> {
    const { job } = input;
    const record = queuedRecord(job, input.digest, input.now, this.retentionDays);
    const item = {
      ...jobKey(job.jobId),
      ...record,
      listKey: LISTS.open(job.workspaceId),
      listSort: listSortKey(record.updatedAt, job.jobId),
    };
    for (let attempt = 0; attempt < MAX_RACE_RETRIES; attempt++) {
      try {
        await this.client.send(
          new PutCommand({
            TableName: this.table,
            Item: item,
            ConditionExpression: 'attribute_not_exists(pk)',
            ...OLD_ITEM_ON_REFUSAL,
          }),
        );
        return { kind: 'queued', record: strip<JobRecord>(item) as JobRecord };
      } catch (error) {
        if (!isConditionFailure(error)) throw error;
        const known = strip<JobRecord>(refusal(error, this.client).item ?? (await this.getJobItem(job.jobId)));
        if (known) return { kind: 'known', record: known };
        // Refused, yet gone by the time it was read: write again.
      }
    }
    throw new TransientJobError(`recording job ${job.jobId} as QUEUED kept racing with other writers`);
  }

  async recordConflict(input: {
    job: JobEnvelope;
    digest: string;
    seenBy: ConflictSeenBy;
    now: number;
  }): Promise<void> {
    const { job } = input;
    const { attempt, token, queue } = conflictEntry(job, input.digest, input.seenBy, input.now);
    const at = attempt.at;
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: conflictKey(job.jobId),
          UpdateExpression:
            'SET jobId = :jobId, attempts = list_append(if_not_exists(attempts, :empty), :attempt), updatedAt = :now, #ttl = :ttl' +
            `${queue ? ', listKey = :dlq, listSort = if_not_exists(listSort, :sort)' : ''} ADD tokens :token`,
          ConditionExpression:
            '(attribute_not_exists(tokens) OR NOT contains(tokens, :tokenValue)) AND (attribute_not_exists(attempts) OR size(attempts) < :max)',
          ExpressionAttributeNames: { '#ttl': LEDGER_TABLE.ttlAttribute },
          ExpressionAttributeValues: {
            ':jobId': job.jobId,
            ':empty': [],
            ':attempt': [attempt],
            ':now': at,
            ':ttl': ttlFor(input.now, this.retentionDays),
            ':token': new Set([token]),
            ':tokenValue': token,
            ':max': MAX_CONFLICTS,
            ...(queue ? { ':dlq': LISTS.dlq, ':sort': listSortKey(at, `conflict#${job.jobId}`) } : {}),
          },
        }),
      );
    } catch (error) {
      // Recorded already, or the record holds MAX_CONFLICTS: the refusal itself stands either way.
      if (!isConditionFailure(error)) throw error;
    }
  }

  async getConflicts(jobId: string): Promise<ConflictAttempt[]> {
    const out = await this.client.send(
      new GetCommand({ TableName: this.table, Key: conflictKey(jobId), ConsistentRead: true }),
    );
    return conflictAttempts(out.Item, jobId);
  }

  async getConflictsOf(jobIds: readonly string[]): Promise<Map<string, ConflictAttempt[]>> {
    const items = await this.getAll(jobIds.map((jobId) => conflictKey(jobId).pk));
    return new Map(items.map((item) => [String(item['jobId']), conflictAttempts(item, String(item['jobId']))]));
  }

  async listWorkspaces(): Promise<WorkspaceRecord[]> {
    const items = await this.getAll(await this.listKeys(LISTS.workspaces));
    return items.map((item) => strip<WorkspaceRecord>(item) as WorkspaceRecord);
  }

  async listOpenJobs(workspaceId: string): Promise<JobRecord[]> {
    const items = await this.getAll(await this.listKeys(LISTS.open(workspaceId)));
    return items.map((item) => strip<JobRecord>(item) as JobRecord);
  }

  async listDlq(): Promise<DlqEntry[]> {
    const items = await this.getAll(await this.listKeys(LISTS.dlq));
    return items.flatMap((item): DlqEntry[] => {
      if (String(item['pk']).startsWith('job#')) return [{ kind: 'job', record: strip<JobRecord>(item) as JobRecord }];
      const jobId = String(item['jobId']);
      return conflictAttempts(item, jobId)
        .filter((attempt) => attempt.seenBy !== 'enqueue')
        .map((attempt) => ({ kind: 'conflict', attempt }));
    });
  }

  /** The primary keys in one of the ledger's lists, in list order. */
  private async listKeys(list: string): Promise<string[]> {
    const items = await this.queryIndex(LEDGER_TABLE.listIndex, list, { projection: LEDGER_TABLE.partitionKey });
    return items.map((item) => String(item[LEDGER_TABLE.partitionKey]));
  }

  /**
   * Whole items by primary key, in the order given (consistent reads; the list index itself is
   * eventually consistent, so an item that left the list since is still returned as it is now).
   */
  private async getAll(pks: readonly string[]): Promise<Record<string, unknown>[]> {
    const found = new Map<string, Record<string, unknown>>();
    for (let i = 0; i < pks.length; i += BATCH_GET_KEYS) {
      let keys: Record<string, unknown>[] = pks.slice(i, i + BATCH_GET_KEYS).map((pk) => ({ pk }));
      for (let round = 0; keys.length > 0; round++) {
        if (round === BATCH_GET_ROUNDS)
          throw new TransientJobError(`BatchGetItem left ${keys.length} key(s) unprocessed after ${round} rounds`);
        const out = await this.client.send(
          new BatchGetCommand({ RequestItems: { [this.table]: { Keys: keys, ConsistentRead: true } } }),
        );
        for (const item of out.Responses?.[this.table] ?? []) found.set(String(item['pk']), item);
        keys = (out.UnprocessedKeys?.[this.table]?.Keys ?? []) as Record<string, unknown>[];
      }
    }
    return pks.flatMap((pk) => {
      const item = found.get(pk);
      return item ? [item] : [];
    });
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
              `#state = if_not_exists(#state, :active), workspaceId = :ws, updatedAt = :now, listKey = :wsList, listSort = :ws${input.repo ? ', #repo = if_not_exists(#repo, :repo)' : ''}`,
            ConditionExpression:
              'attribute_not_exists(pk) OR (#state = :active AND (attribute_not_exists(currentDone) OR currentDone = :true)' +
              // Bound by the first job: a job naming another repository or branch never takes the cursor (matchesBinding).
              `${input.repo ? ' AND (attribute_not_exists(#repo) OR (#repo.#url = :repoUrl AND #repo.#branch = :repoBranch))' : ''})`,
            ExpressionAttributeNames: {
              '#state': 'state',
              ...(input.repo ? { '#repo': 'repo', '#url': 'url', '#branch': 'branch' } : {}),
            },
            ExpressionAttributeValues: {
              ':zero': 0,
              ':one': 1,
              ':job': input.jobId,
              ':false': false,
              ':true': true,
              ':active': 'ACTIVE',
              ':ws': input.workspaceId,
              ':now': new Date(input.now).toISOString(),
              ':wsList': LISTS.workspaces,
              ...(input.repo
                ? { ':repo': input.repo, ':repoUrl': input.repo.url, ':repoBranch': input.repo.branch }
                : {}),
            },
            ReturnValues: 'ALL_NEW',
            ...OLD_ITEM_ON_REFUSAL,
          }),
        );
        return { kind: 'taken', workspace: strip<WorkspaceRecord>(out.Attributes) as WorkspaceRecord };
      } catch (error) {
        if (!isConditionFailure(error)) throw error;
        // The workspace as the refusing condition saw it; read only when the refusal came without it.
        const workspace = refusal(error, this.client).item ?? (await this.getItem(wsKey(input.workspaceId)));
        const outcome = workspaceTakeOutcome(strip<WorkspaceRecord>(workspace), input.jobId, input.repo);
        if (outcome.kind !== 'retry') return outcome;
      }
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
      if (isConditionFailure(error))
        throw new LeaseLostError(`workspace ${input.workspaceId}: cursor no longer on job ${input.jobId}`);
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
          'seq = if_not_exists(seq, :zero), workspaceId = :ws, updatedAt = :now, listKey = :wsList, listSort = :ws',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: {
          ':blocked': 'BLOCKED',
          ':by': input.blockedBy,
          ':reason': input.reason,
          ':true': true,
          ':zero': 0,
          ':ws': input.workspaceId,
          ':now': new Date(input.now).toISOString(),
          ':wsList': LISTS.workspaces,
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

  async bindBranch(input: BindBranchInput): Promise<BranchBinding> {
    const Key = { pk: branchBindingKey(input.repo) };
    for (let attempt = 0; attempt < MAX_RACE_RETRIES; attempt++) {
      const write = await this.writeBinding(Key, input, 'free or ours');
      if (write === 'written') return { kind: 'bound' };
      // The binding as the refusing condition saw it; read only when the refusal came without it.
      const holder = holderOf(write.item ?? (await this.getItem(Key.pk)));
      // Released, or bound to this workspace, between the write and the read: write again.
      if (holder === undefined || holder.workspaceId === input.workspaceId) continue;
      if (!isStaleBinding(await this.getWorkspace(holder.workspaceId), input.repo)) return { kind: 'taken', holder };
      if ((await this.writeBinding(Key, input, holder)) === 'written') return { kind: 'bound' };
    }
    throw new TransientJobError(
      `binding of ${input.repo.url} branch ${input.repo.branch} kept racing with other writers`,
    );
  }

  /**
   * One conditional write of a branch binding: `free or ours` claims a binding nobody holds (or
   * keeps this workspace's, with the job that made it); a holder's binding is handed over only
   * while that holder still has it.
   */
  private async writeBinding(
    Key: { pk: string },
    input: BindBranchInput,
    from: 'free or ours' | { workspaceId: string; jobId: string },
  ): Promise<'written' | Refusal> {
    const handOver = from !== 'free or ours';
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key,
          UpdateExpression: handOver
            ? 'SET workspaceId = :ws, jobId = :job, repoUrl = :url, #branch = :branch, boundAt = :now'
            : 'SET workspaceId = :ws, jobId = if_not_exists(jobId, :job), repoUrl = if_not_exists(repoUrl, :url), #branch = if_not_exists(#branch, :branch), boundAt = if_not_exists(boundAt, :now)',
          // A released binding keeps its item without a holder (release is an update: the functions may not delete).
          ConditionExpression: handOver
            ? 'workspaceId = :holder AND jobId = :holderJob'
            : 'attribute_not_exists(workspaceId) OR workspaceId = :ws',
          ExpressionAttributeNames: { '#branch': 'branch' },
          ExpressionAttributeValues: {
            ':ws': input.workspaceId,
            ':job': input.jobId,
            ':url': input.repo.url,
            ':branch': input.repo.branch,
            ':now': new Date(input.now).toISOString(),
            ...(handOver ? { ':holder': from.workspaceId, ':holderJob': from.jobId } : {}),
          },
          ...OLD_ITEM_ON_REFUSAL,
        }),
      );
      return 'written';
    } catch (error) {
      if (isConditionFailure(error)) return refusal(error, this.client);
      throw error;
    }
  }

  async releaseBranch(input: Omit<BindBranchInput, 'now'>): Promise<void> {
    try {
      // An update that removes the holder, not a DeleteItem: the functions' role updates the table
      // and never deletes from it (test/infra/template-rules.ts).
      await this.client.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { pk: branchBindingKey(input.repo) },
          UpdateExpression: 'REMOVE workspaceId, jobId, boundAt',
          ConditionExpression: 'workspaceId = :ws AND jobId = :job',
          ExpressionAttributeValues: { ':ws': input.workspaceId, ':job': input.jobId },
        }),
      );
    } catch (error) {
      // Made by another job, or not there: nothing of this job's to give up.
      if (!isConditionFailure(error)) throw error;
    }
  }
}
