/**
 * The MCP server's tools: one per job type of the catalog, which sends a job of that type, and the
 * reads an agent follows its jobs with. Every tool is a thin layer over tools/operator, the read model
 * and operations the CLI and the console use: no rule lives here.
 *
 * A job type's tool has no code of its own. Its input is the job envelope less what the server
 * fills in (the type is the tool, createdAt is stamped, jobId and tenantId have defaults), with
 * the payload schema of the catalog, so the tool refuses what the platform would refuse, naming
 * the field; the producer then validates the whole envelope again before anything is sent. A fork
 * that declares a job type gets its tool from that declaration alone.
 */
import * as path from 'node:path';
import * as z from 'zod/mini';
import {
  COMMAND_JOB_TYPES,
  commandStageOf,
  idSchema,
  JOB_TYPE_NAMES,
  JOB_TYPES,
  type JobType,
} from '../../contract/job-types';
import '../../contract/zod-english';
import { MAX_DIFF_BYTES } from '../../contract/runtime-env';
import { NotAFileError, readFileAtMost, TooLargeError, unreadableReason } from '../operator/bounded-read';
import { tail } from '../../src/core/jobs/command-stage';
import { envelopeIdFields } from '../../src/core/envelope';
import type { JobRecord, ConflictAttempt } from '../../src/core/ports';
import type { JobRequest } from '../../src/client/producer';
import {
  aJobOfType,
  conflictSummary,
  DEFAULT_TENANT,
  enqueueJob,
  InvalidRequestError,
  jobFinished,
  jobSummary,
  progressLine,
  publicJob,
  publicWorkspace,
  readJob,
  readJobs,
  readRunOutputs,
  followRunOutput,
  readTimeline,
  readWorkspaceStanding,
  runbookAdvice,
  cancelJob,
  dismissJob,
  dismissalWords,
  redrive,
  unblockWorkspace,
  stateSucceeded,
  statusLabel,
  waitForJobs,
  type Connection,
  type WaitState,
} from '../operator';
import type { McpScope } from './scope';

// The producer loads with the SQS SDK, at the first job sent (require: see tools/operator/targets.ts).
const loadProducer = (): typeof import('../../src/client/producer') => require('../../src/client/producer');

/** What a tool gets besides its arguments. */
export interface ToolContext {
  readonly connection: Connection;
  /** The workspaces this server acts on: every tool checks what it touches here first. */
  readonly scope: McpScope;
  /** Who calls, as the ledger records an operator's act: the MCP client's name, "<name> (mcp)". */
  readonly actor: string;
  /** Relative file paths in arguments (a diff file) are read from here. */
  readonly cwd: string;
  /** Aborted when the client cancels the call. */
  readonly signal: AbortSignal;
  /** A progress notification, when the client asked for them (MCP requires `progress` to increase with each; `total` when known). */
  progress(progress: number, total: number | undefined, message: string): Promise<void>;
}

export interface ToolSpec<S extends z.ZodMiniObject = z.ZodMiniObject> {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly input: S;
  /** Reads only (an MCP annotation: clients may call it without asking). */
  readonly readOnly: boolean;
  /** Ends or discards something (an MCP annotation: clients ask before they call it). */
  readonly destructive?: boolean;
  /** The tool's structured result; a thrown error becomes a tool error (server.ts). */
  run(args: z.output<S>, context: ToolContext): Promise<Record<string, unknown>>;
}

/** `wait_for_jobs` returns after this long unless told otherwise: under the 60 s many MCP clients allow a call. */
export const DEFAULT_WAIT_SECONDS = 30;
/** The longest `wait_for_jobs` waits in one call; an agent calls it again to wait longer. */
export const MAX_WAIT_SECONDS = 600;
/** Output `test_log` returns unless told otherwise (what `status` keeps in a verdict). */
export const DEFAULT_LOG_TAIL_BYTES = 8 * 1024;
/** The most `test_log` returns: what the local runner keeps of a run. */
export const MAX_LOG_TAIL_BYTES = 1024 * 1024;
const MAX_WAIT_JOBS = 100;
const MAX_HISTORY_PAGE = 100;

/**
 * Payload fields an agent may give as a file instead, read by the server as bytes (any encoding
 * reaches the branch byte for byte, as with the CLI's --diff-file): the field, and its file field.
 */
const FILE_FIELDS: Readonly<Record<string, string>> = { diff: 'diffFile' };
/** Payload fields the producer sets, never the sender: a diff over the inline limit is stored and referenced. */
const PRODUCER_FIELDS: readonly string[] = ['diffRef'];

/** A job type's payload as a tool takes it: its schema's fields, less the producer's, plus the file alternatives. */
function payloadInput(schema: z.ZodMiniType): z.ZodMiniType {
  const def = schema._zod.def;
  if (def.type !== 'object') return schema;
  const shape: Record<string, z.core.$ZodType> = { ...(def as z.core.$ZodObjectDef).shape };
  for (const field of PRODUCER_FIELDS) delete shape[field];
  for (const [field, fileField] of Object.entries(FILE_FIELDS)) {
    if (!(field in shape)) continue;
    shape[fileField] = z.optional(
      z
        .string()
        .check(
          z.minLength(1),
          z.describe(
            `Instead of ${field}: the path of a file holding it (e.g. written by \`git diff > file\`), read as bytes by the server; relative to the server's working directory.`,
          ),
        ),
    );
  }
  // The object's own checks (one diff form of three) are the producer's: it runs them on the envelope.
  return z.strictObject(shape);
}

function jobToolInput(type: JobType) {
  const payload = payloadInput(JOB_TYPES[type].payload);
  const everyFieldOptional = payload.safeParse({}).success;
  return z.strictObject({
    workspaceId: envelopeIdFields.workspaceId,
    jobId: z.optional(
      idSchema('jobId').check(
        z.describe(
          'Your id for the job (1-64 of A-Z a-z 0-9 . _ -). Give one, and a retried call with the same id and payload enqueues once; without it the tool makes one and returns it.',
        ),
      ),
    ),
    tenantId: z.optional(
      envelopeIdFields.tenantId.check(z.describe(`Who the job is for (default "${DEFAULT_TENANT}").`)),
    ),
    payload: everyFieldOptional ? z.optional(payload) : payload,
  });
}

/** The file fields of a payload replaced by the bytes of their files. */
async function withFiles(payload: Record<string, unknown>, cwd: string): Promise<Record<string, unknown>> {
  const resolved = { ...payload };
  for (const [field, fileField] of Object.entries(FILE_FIELDS)) {
    const file = resolved[fileField];
    if (typeof file !== 'string') continue;
    if (resolved[field] !== undefined)
      throw new InvalidRequestError(`payload.${fileField}: give ${field} or ${fileField}, not both`);
    delete resolved[fileField];
    resolved[field] = await readFileField(`payload.${fileField}`, path.resolve(cwd, file));
  }
  return resolved;
}

/**
 * A file field's bytes, read to the diff limit and no further (tools/operator/bounded-read.ts): a
 * server refuses anything but a regular file, since a FIFO or a device would hold the call.
 */
async function readFileField(field: string, file: string): Promise<Uint8Array> {
  try {
    return await readFileAtMost(file, MAX_DIFF_BYTES, { regularOnly: true });
  } catch (error) {
    if (error instanceof NotAFileError) throw new InvalidRequestError(`${field}: ${file} is not a file`);
    if (error instanceof TooLargeError)
      throw new InvalidRequestError(`${field}: ${file} is over the ${MAX_DIFF_BYTES}-byte limit`);
    throw new InvalidRequestError(`${field}: cannot read ${file}: ${unreadableReason(error)}`);
  }
}

const LANE_NOTE = {
  ordered:
    "It takes effect in order with the workspace's other jobs; an apply_patch that cannot apply blocks the workspace (later jobs are skipped until unblock_workspace lifts the fence).",
  staged: "It runs at the workspace's head commit as it is when its turn comes (after the jobs sent before it).",
} as const;

/** The tool of one job type: sends a job of that type (tools/operator/enqueue.ts) and returns its id at once. */
function jobTool(type: JobType): ToolSpec {
  const declaration = JOB_TYPES[type];
  return {
    name: type,
    title: `Send ${aJobOfType(type)}`,
    description: [
      `Send ${aJobOfType(type)}: ${declaration.summary}.`,
      LANE_NOTE[declaration.lane],
      'Returns the job id at once: follow it with wait_for_jobs, job_status' +
        (commandStageOf(type) ? ' and test_log.' : '.'),
    ].join(' '),
    input: jobToolInput(type),
    readOnly: false,
    async run(
      args: { workspaceId: string; jobId?: string; tenantId?: string; payload?: Record<string, unknown> },
      context,
    ) {
      context.scope.requireWorkspace(args.workspaceId);
      const jobId = args.jobId ?? loadProducer().newJobId();
      const tenantId = args.tenantId ?? DEFAULT_TENANT;
      const payload = await withFiles(args.payload ?? {}, context.cwd);
      const sent = await enqueueJob(context.connection, {
        type,
        jobId,
        workspaceId: args.workspaceId,
        tenantId,
        payload,
      } as JobRequest);
      return {
        jobId,
        type,
        workspaceId: args.workspaceId,
        tenantId,
        status: sent.existing ?? 'QUEUED',
        // A retried call of the same request: not sent again when it finished, sent again (and deduplicated) when not.
        ...(sent.existing ? { alreadyKnown: true } : {}),
      };
    },
  };
}

/** A job as the tools show it: the public record, its status in words, and one line about its outcome. */
function jobView(job: JobRecord, conflicts: readonly ConflictAttempt[] = []) {
  const state = { job, conflicts };
  const finished = jobFinished(state);
  return {
    ...publicJob(job, conflicts),
    label: statusLabel(job),
    summary: conflictSummary(conflicts) ?? jobSummary(job),
    finished,
    ...(finished ? { succeeded: stateSucceeded(state) } : {}),
  };
}

const jobStatus: ToolSpec = {
  name: 'job_status',
  title: 'Status of a job',
  description:
    "A job's record: its status (SUCCEEDED, FAILED with a reason, SKIPPED with its cause, CANCELLED, or not finished yet), result (the commit, a test verdict, the pull request) and any refused request that reused its id.",
  input: z.strictObject({ jobId: idSchema('jobId') }),
  readOnly: true,
  async run({ jobId }: { jobId: string }, { connection, scope }) {
    const { job, conflicts } = await readJob(connection, jobId);
    scope.requireJob(job);
    return jobView(job, conflicts);
  },
};

const waitForJobsTool: ToolSpec = {
  name: 'wait_for_jobs',
  title: 'Wait for jobs',
  description:
    `Wait until every job named is finished, or timeoutSeconds pass (default ${DEFAULT_WAIT_SECONDS}, at most ${MAX_WAIT_SECONDS}): then call it again to wait longer. ` +
    'Sends progress notifications (finished jobs of all) when asked. Returns each job, whether all finished and whether all succeeded (a test run whose tests failed did not).',
  input: z.strictObject({
    jobIds: z.array(idSchema('jobId')).check(z.minLength(1), z.maxLength(MAX_WAIT_JOBS)),
    timeoutSeconds: z.optional(z.int().check(z.minimum(1), z.maximum(MAX_WAIT_SECONDS))),
  }),
  readOnly: true,
  async run({ jobIds, timeoutSeconds }: { jobIds: string[]; timeoutSeconds?: number }, context) {
    const ids = [...new Set(jobIds)];
    for (const { job } of (await readJobs(context.connection, ids)).states) context.scope.requireJob(job);
    const timeoutMs = (timeoutSeconds ?? DEFAULT_WAIT_SECONDS) * 1000;
    const deadline = Date.now() + timeoutMs;
    let reported = -1;
    const onChange = async (states: readonly WaitState[]) => {
      const finished = states.filter(jobFinished).length;
      // Progress is for a wait that goes on: the read that ends it is the result. (The SDK's client
      // handles a notification a microtask after a response that arrived with it, and would find its
      // call gone.)
      if (finished <= reported || finished === states.length || Date.now() >= deadline) return;
      reported = finished;
      await context.progress(
        finished,
        states.length,
        `${finished} of ${states.length} finished: ${progressLine(states)}`,
      );
    };
    const outcome = await waitForJobs(context.connection, ids, { timeoutMs, onChange, signal: context.signal });
    return {
      allFinished: outcome.finished,
      allSucceeded: outcome.succeeded,
      jobs: outcome.states.map((s) => jobView(s.job, s.conflicts)),
    };
  },
};

const workspaceState: ToolSpec = {
  name: 'workspace_state',
  title: 'Where a workspace stands',
  description:
    'A workspace now: ACTIVE or BLOCKED (by which job, why, and what an operator does about it), its repository and branch, its head commit, and its jobs not finished yet. ' +
    'Its timeline is the resource agent-jobs://workspaces/{workspaceId}/timeline, and workspace_history pages through it.',
  input: z.strictObject({ workspaceId: idSchema('workspaceId') }),
  readOnly: true,
  async run({ workspaceId }: { workspaceId: string }, { connection, scope }) {
    scope.requireWorkspace(workspaceId);
    const { workspace, unfinished } = await readWorkspaceStanding(connection, workspaceId);
    const advice = workspace?.blockedReason ? runbookAdvice(workspace.blockedReason) : undefined;
    return {
      ...(workspace ? publicWorkspace(workspace) : { workspaceId, state: 'NOT_TAKEN_YET' }),
      ...(advice ? { blockedAdvice: { meaning: advice.meaning, recovery: advice.recovery } } : {}),
      unfinished: unfinished.map((job) => jobView(job)),
    };
  },
};

const workspaceHistory: ToolSpec = {
  name: 'workspace_history',
  title: "A workspace's jobs in order",
  description:
    "A workspace's jobs in the order they took effect, a page at a time (newest first unless order is oldest): each with its status, commit or verdict. " +
    'Pass the returned next as after for the following page. Jobs not taken yet are listed apart (waiting).',
  input: z.strictObject({
    workspaceId: idSchema('workspaceId'),
    order: z.optional(z.enum(['newest', 'oldest'])),
    after: z.optional(
      z.int().check(z.nonnegative(), z.describe('The next of the previous page: continue after this sequence number.')),
    ),
    limit: z.optional(z.int().check(z.minimum(1), z.maximum(MAX_HISTORY_PAGE))),
  }),
  readOnly: true,
  async run(
    args: { workspaceId: string; order?: 'newest' | 'oldest'; after?: number; limit?: number },
    { connection, scope },
  ) {
    scope.requireWorkspace(args.workspaceId);
    return timelineView(
      await readTimeline(connection, args.workspaceId, {
        order: args.order,
        after: args.after,
        limit: args.limit ?? 20,
      }),
    );
  },
};

/** A timeline page as the tools and the resource return it. */
export function timelineView(timeline: Awaited<ReturnType<typeof readTimeline>>): Record<string, unknown> {
  return {
    workspace: timeline.workspace ? publicWorkspace(timeline.workspace) : undefined,
    waiting: timeline.waiting.map((row) => jobView(row.job, row.conflicts)),
    order: timeline.order,
    jobs: timeline.rows.map((row) => jobView(row.job, row.conflicts)),
    next: timeline.next,
  };
}

const testLog: ToolSpec = {
  name: 'test_log',
  title: "The tail of a run's output",
  description:
    `The last bytes of what a ${COMMAND_JOB_TYPES.join(' / ')} job's command printed (its latest run, also while it runs: then running is true), default ${DEFAULT_LOG_TAIL_BYTES}, at most ${MAX_LOG_TAIL_BYTES}. ` +
    `With followSeconds (at most ${MAX_WAIT_SECONDS}): first follows the output as it is printed, each piece a progress notification, until the job finishes or the time passes. ` +
    'On a deployed stack: the tail its verdict kept, and the link to the build log.',
  input: z.strictObject({
    jobId: idSchema('jobId'),
    tailBytes: z.optional(z.int().check(z.minimum(1), z.maximum(MAX_LOG_TAIL_BYTES))),
    followSeconds: z.optional(
      z
        .int()
        .check(
          z.minimum(1),
          z.maximum(MAX_WAIT_SECONDS),
          z.describe('Follow the output as it is printed for up to this long (progress notifications), then answer.'),
        ),
    ),
  }),
  readOnly: true,
  async run(
    { jobId, tailBytes, followSeconds }: { jobId: string; tailBytes?: number; followSeconds?: number },
    context,
  ) {
    const { connection } = context;
    context.scope.requireJob((await readJob(connection, jobId)).job);
    if (followSeconds !== undefined) await followAsProgress(jobId, followSeconds, context);
    const { job } = await readJob(connection, jobId);
    if (!commandStageOf(job.type))
      throw new InvalidRequestError(
        `jobId: ${jobId} is a ${job.type} job: only command stages (${COMMAND_JOB_TYPES.join(', ')}) have output`,
      );
    const bytes = tailBytes ?? DEFAULT_LOG_TAIL_BYTES;
    const lines = await readRunOutputs(await connection.target(), job);
    const base = { jobId, status: statusLabel(job) };
    const output = lines.filter((line) => line.kind === 'output').at(-1);
    if (output?.kind === 'output') {
      const kept = tail(output.text, bytes);
      return {
        ...base,
        run: output.run,
        buildId: output.buildId,
        ...(output.running && { running: true }),
        truncated: kept.length < output.text.length,
        tail: kept,
      };
    }
    const kept = typeof job.result?.['logTail'] === 'string' ? tail(job.result['logTail'], bytes) : undefined;
    const links = lines.flatMap((line) => (line.kind === 'link' ? [line.url] : []));
    if (kept === undefined && links.length === 0)
      return {
        ...base,
        tail: '',
        note: jobFinished({ job, conflicts: [] })
          ? 'no output was kept'
          : 'no output yet: the run has not started or not ended',
      };
    return { ...base, ...(kept !== undefined ? { tail: kept } : {}), ...(links.length ? { links } : {}) };
  },
};

/** Bytes of output in one progress notification: a piece longer than that goes in several. */
const PROGRESS_OUTPUT_BYTES = 4 * 1024;

/**
 * Follows a run's output for up to `seconds`, each piece as progress notifications (progress: bytes
 * so far). Pieces read once the job has finished are left to the answer: the SDK's client handles a
 * notification after the response that came with it and would find its call gone.
 */
async function followAsProgress(jobId: string, seconds: number, context: ToolContext): Promise<void> {
  let sent = 0;
  const signal = AbortSignal.any([context.signal, AbortSignal.timeout(seconds * 1000)]);
  await followRunOutput(context.connection, jobId, {
    signal,
    onOutput: async (text, last) => {
      if (last) return;
      for (let at = 0; at < text.length; at += PROGRESS_OUTPUT_BYTES) {
        const piece = text.slice(at, at + PROGRESS_OUTPUT_BYTES);
        sent += piece.length;
        await context.progress(sent, undefined, piece);
      }
    },
  });
}

/** Where a workspace stands after a recovery, in a result's words: its state, and what is not finished. */
async function standingAfter(
  connection: Connection,
  workspaceId: string,
): Promise<{ workspace: Record<string, unknown>; words: string }> {
  const { workspace, unfinished } = await readWorkspaceStanding(connection, workspaceId).catch(() => ({
    workspace: undefined,
    unfinished: [],
  }));
  const state = workspace?.state ?? 'NOT_TAKEN_YET';
  const blocked =
    workspace?.state === 'BLOCKED'
      ? ` (blocked by ${workspace.blockedBy ?? '?'}: ${workspace.blockedReason ?? '?'})`
      : '';
  const words = `workspace ${workspaceId} is ${state}${blocked}; ${unfinished.length} of its jobs not finished${unfinished.length ? ` (${unfinished.map((j) => j.jobId).join(', ')})` : ''}`;
  return {
    workspace: {
      workspaceId,
      state,
      ...(workspace?.blockedBy ? { blockedBy: workspace.blockedBy } : {}),
      unfinished: unfinished.map((job) => job.jobId),
    },
    words,
  };
}

const RECOVERY_NOTE =
  'The same operation, with the same rules, as the CLI command of the same name; it acts only on the workspaces this server is started for.';

const cancelTool: ToolSpec = {
  name: 'cancel_job',
  title: 'Cancel a job',
  description:
    'Cancel a job that has not finished (agent-jobs cancel): a queued or waiting job never runs; a skipped one leaves the DLQ; a running test or lint run is stopped. ' +
    "A running apply_patch or open_pr runs to its end and a finished job stays as it is (refused, saying why). Cancelling a skipped job does not lift its workspace's fence: unblock_workspace does. " +
    RECOVERY_NOTE,
  input: z.strictObject({ jobId: idSchema('jobId') }),
  readOnly: false,
  destructive: true,
  async run({ jobId }: { jobId: string }, { connection, scope }) {
    const { job } = await readJob(connection, jobId);
    scope.requireJob(job);
    const cancelled = await cancelJob(connection, jobId);
    const after = await standingAfter(connection, job.workspaceId);
    return {
      jobId,
      previousStatus: cancelled.previous,
      status: cancelled.job.status,
      summary: `job ${jobId}: ${cancelled.previous} -> CANCELLED (${cancelled.effect}); ${after.words}`,
      workspace: after.workspace,
    };
  },
};

const unblockTool: ToolSpec = {
  name: 'unblock_workspace',
  title: "Lift a workspace's fence",
  description:
    "Lift a BLOCKED workspace's fence (agent-jobs workspace unblock): mode replay sends its skipped jobs back to the queue in their order; drop records them CANCELLED. " +
    'The job that blocked it stays on the DLQ (dismiss_job or redrive_jobs decide about it). A replay that could not replay every skipped job is refused and the workspace stays BLOCKED; drop ends those too. Running it again is safe. ' +
    RECOVERY_NOTE,
  input: z.strictObject({
    workspaceId: idSchema('workspaceId'),
    mode: z
      .enum(['replay', 'drop'])
      .check(z.describe('replay: the skipped jobs run again in their order; drop: they are cancelled.')),
  }),
  readOnly: false,
  destructive: true,
  async run({ workspaceId, mode }: { workspaceId: string; mode: 'replay' | 'drop' }, { connection, scope }) {
    scope.requireWorkspace(workspaceId);
    const result = await unblockWorkspace(connection, workspaceId, mode);
    const acted = (action: string) => result.jobs.filter((j) => j.action === action).map((j) => j.jobId);
    const [replayed, dropped, kept] = [acted('replayed'), acted('dropped'), acted('kept')];
    const after = await standingAfter(connection, workspaceId);
    const changed =
      result.previousState === 'BLOCKED'
        ? `workspace ${workspaceId} ${result.workspace.state} again (was BLOCKED)`
        : `workspace ${workspaceId} was ${result.previousState} already`;
    const parts = [
      changed,
      ...(replayed.length ? [`replayed in order: ${replayed.join(', ')}`] : []),
      ...(dropped.length ? [`dropped (CANCELLED): ${dropped.join(', ')}`] : []),
      `${kept.length} job(s) of it still on the DLQ${kept.length ? ` (${kept.join(', ')}: dismiss_job or redrive_jobs)` : ''}`,
      after.words,
    ];
    return {
      workspaceId,
      previousState: result.previousState,
      state: result.workspace.state,
      mode,
      jobs: result.jobs,
      stillOnDlq: kept,
      summary: parts.join('; '),
      workspace: after.workspace,
    };
  },
};

const dismissTool: ToolSpec = {
  name: 'dismiss_job',
  title: 'Dismiss a failed job',
  description:
    'Record a FAILED job as dealt with, with your reason, and remove its DLQ copy: it never runs again (agent-jobs dlq dismiss). The ledger records who: this MCP client, "<client name> (mcp)". ' +
    'Running it again is safe (the first dismissal stands). A workspace the job blocked stays BLOCKED: unblock_workspace decides about its skipped jobs. ' +
    RECOVERY_NOTE,
  input: z.strictObject({
    jobId: idSchema('jobId'),
    reason: z
      .string()
      .check(z.minLength(1), z.maxLength(500), z.describe('Why it needs no redrive (kept in the ledger).')),
  }),
  readOnly: false,
  destructive: true,
  async run({ jobId, reason }: { jobId: string; reason: string }, { connection, scope, actor }) {
    const { job } = await readJob(connection, jobId);
    scope.requireJob(job);
    const result = await dismissJob(connection, jobId, { by: actor, reason });
    const after = await standingAfter(connection, job.workspaceId);
    const dismissal = result.job.dismissed ? dismissalWords(result.job.dismissed) : 'dismissed';
    const parts = [
      `job ${jobId}: FAILED, ${dismissal}${result.alreadyDismissed ? ' (already)' : ''}`,
      `${result.removed} copy removed from the ${result.queue} DLQ`,
      ...result.left.map((l) => `left on the ${l.queue} DLQ: ${l.why}`),
      ...(result.blockedWorkspace
        ? [
            `workspace ${result.blockedWorkspace.workspaceId} stays BLOCKED: unblock_workspace (replay or drop) decides about its skipped jobs`,
          ]
        : []),
      after.words,
    ];
    return {
      jobId,
      dismissed: result.job.dismissed,
      alreadyDismissed: result.alreadyDismissed,
      queue: result.queue,
      removed: result.removed,
      left: result.left,
      summary: parts.join('; '),
      workspace: after.workspace,
    };
  },
};

const redriveTool: ToolSpec = {
  name: 'redrive_jobs',
  title: 'Run failed jobs again',
  description:
    "Send the named jobs on a DLQ back to their queue to run again, in their workspace's order (agent-jobs dlq redrive <jobIds>): for a FAILED job whose cause is fixed. " +
    'Skipped jobs of a BLOCKED workspace are left (unblock_workspace replays them), and so are refused conflicting requests and invalid ones. ' +
    RECOVERY_NOTE,
  input: z.strictObject({ jobIds: z.array(idSchema('jobId')).check(z.minLength(1), z.maxLength(MAX_WAIT_JOBS)) }),
  readOnly: false,
  async run({ jobIds }: { jobIds: string[] }, { connection, scope }) {
    const ids = [...new Set(jobIds)];
    const read = await readJobs(connection, ids);
    for (const { job } of read.states) scope.requireJob(job);
    const result = await redrive(connection, { jobIds: ids });
    const missed = ids.filter((id) => !result.redriven.some((r) => r.jobId === id));
    const parts = [
      `${result.redriven.length} of ${ids.length} sent back to run again${result.redriven.length ? ` (${result.redriven.map((r) => r.jobId).join(', ')})` : ''}`,
      ...result.left.map((l) => `left on the ${l.queue} DLQ: ${l.jobId} (${l.why})`),
      ...read.unknown.map((id) => `${id}: not in the ledger`),
    ];
    return { redriven: result.redriven, left: result.left, notRedriven: missed, summary: parts.join('; ') };
  },
};

/** Tools that are not a job type's; a job type of the same name would be ambiguous. */
const READ_TOOLS: readonly ToolSpec[] = [jobStatus, waitForJobsTool, workspaceState, workspaceHistory, testLog];
/** The recovery an operator does with the CLI, on the workspaces of the server's scope. */
const RECOVERY_TOOLS: readonly ToolSpec[] = [cancelTool, unblockTool, dismissTool, redriveTool];
const PLATFORM_TOOLS: readonly ToolSpec[] = [...READ_TOOLS, ...RECOVERY_TOOLS];

/** Every tool: one per job type of the catalog, then the reads and the recovery. Throws when a job type is named like a read. */
export function agentJobsTools(): ToolSpec[] {
  const clash = JOB_TYPE_NAMES.filter((type) => PLATFORM_TOOLS.some((tool) => tool.name === type));
  if (clash.length > 0)
    throw new Error(`job type ${clash.join(', ')} has the name of an MCP tool of the platform: rename the job type`);
  return [...JOB_TYPE_NAMES.map(jobTool), ...PLATFORM_TOOLS];
}
