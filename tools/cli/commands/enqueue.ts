/** `enqueue`: one job onto the FIFO queue, from flags or as JSON on stdin (tools/operator/enqueue.ts sends it). */
import * as path from 'node:path';
import { JOB_TYPES, JOB_TYPE_NAMES, type JobType } from '../../../contract/job-types';
import { InvalidJobError } from '../../../src/core/errors';
import type { JobRequest } from '../../../src/client/producer';
import { readFileAtMost, TooLargeError } from '../../operator/bounded-read';
import { readStdinAtMost, STDIN_DOCUMENT_LIMIT_BYTES } from '../bounded-read';
import { requireString, stringOption, type CommandSpec, type OptionValues } from '../command';
import type { CliContext } from '../context';
import { UsageError } from '../errors';
import { DEFAULT_TENANT, enqueueJob } from '../../operator/enqueue';
import { inFlagWords, payloadFlags, payloadFromFlags, payloadOptionSpecs } from '../job-options';

// The producer loads with the SQS SDK, only when a job is sent (require: see tools/operator/targets.ts).
const loadProducer = (): typeof import('../../../src/client/producer') => require('../../../src/client/producer');

const FLAGS = payloadFlags();
const PATH = ['enqueue'] as const;

function parseJsonObject(text: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`${what} is not JSON: ${(error as Error).message}`, PATH);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new UsageError(`${what} must be a JSON object`, PATH);
  return value as Record<string, unknown>;
}

async function readJobDocument(ctx: CliContext): Promise<string> {
  try {
    return (await readStdinAtMost(ctx.io, STDIN_DOCUMENT_LIMIT_BYTES)).toString('utf8');
  } catch (error) {
    if (error instanceof TooLargeError) throw new UsageError(`the job on stdin: ${error.message}`, PATH);
    throw error;
  }
}

function jobType(value: string | undefined): JobType {
  if (value === undefined) throw new UsageError('--type is required', PATH);
  if (!(JOB_TYPE_NAMES as string[]).includes(value))
    throw new UsageError(`unknown --type ${value}: one of ${JOB_TYPE_NAMES.join(', ')}`, PATH);
  return value as JobType;
}

/** The job as given: flags fill in what a stdin document leaves out, a generated id last. */
export async function jobFromArgs(ctx: CliContext, values: OptionValues, fromStdin: boolean): Promise<JobRequest> {
  // Bytes, not text: a diff in any encoding must reach the tree byte for byte (the producer picks
  // how it travels). Read no further than the flag's limit, whatever the file is.
  const readBytes = (file: string, maxBytes: number): Promise<Uint8Array> =>
    file === '-' ? readStdinAtMost(ctx.io, maxBytes) : readFileAtMost(path.resolve(ctx.io.cwd, file), maxBytes);
  const document = fromStdin ? parseJsonObject(await readJobDocument(ctx), 'the job on stdin') : {};
  const given = (key: string, flag: string) =>
    typeof document[key] === 'string' ? (document[key] as string) : stringOption(values, flag);
  const type = jobType(given('type', 'type'));
  const rawPayload = stringOption(values, 'payload');
  const base =
    rawPayload !== undefined
      ? parseJsonObject(rawPayload, '--payload')
      : ((document.payload ?? {}) as Record<string, unknown>);
  return {
    ...document,
    type,
    jobId: given('jobId', 'job-id') ?? loadProducer().newJobId(),
    workspaceId: fromStdin ? (given('workspaceId', 'workspace') ?? '') : requireString(values, 'workspace', PATH),
    tenantId: given('tenantId', 'tenant') ?? DEFAULT_TENANT,
    payload: await payloadFromFlags(type, values, FLAGS, base, readBytes, PATH),
  } as JobRequest;
}

export const enqueue: CommandSpec<CliContext> = {
  path: PATH,
  summary: 'send a job to the FIFO queue (prints its job id)',
  positionals: [
    { name: '-', literal: true, description: 'read the job as JSON from stdin (same as --stdin)', optional: true },
  ],
  options: {
    type: { type: 'string', valueName: 'type', description: `job type: ${JOB_TYPE_NAMES.join(', ')}` },
    workspace: { type: 'string', valueName: 'id', description: 'workspace id (required)' },
    'job-id': {
      type: 'string',
      valueName: 'id',
      description: 'job id (generated when absent; reuse it to retry safely)',
    },
    tenant: { type: 'string', valueName: 'id', description: `tenant id (default "${DEFAULT_TENANT}")` },
    payload: {
      type: 'string',
      valueName: 'json',
      description: 'the payload as JSON; flags below set fields on top of it',
    },
    stdin: { type: 'boolean', description: 'read the job as JSON from stdin: {"type","workspaceId","payload",...}' },
    ...payloadOptionSpecs(FLAGS),
  },
  notes: ['Job types:', ...JOB_TYPE_NAMES.map((t) => `  ${t.padEnd(12)} ${JOB_TYPES[t].summary}`)],
  async run(ctx, { positionals, values }) {
    const fromStdin = values.stdin === true || positionals[0] === '-';
    if (positionals.length > 0 && positionals[0] !== '-')
      throw new UsageError(`unexpected argument: ${positionals[0]}`, PATH);
    const job = await jobFromArgs(ctx, values, fromStdin);
    let sent;
    try {
      sent = await enqueueJob(ctx, job);
    } catch (error) {
      // A job from flags is described by its flags; one from stdin by its fields.
      if (error instanceof InvalidJobError)
        throw new UsageError((!fromStdin && inFlagWords(error.issues, job, values, FLAGS)) || error.message, PATH);
      throw error;
    }
    const what = `${job.type} ${sent.jobId} for workspace ${job.workspaceId}`;
    if (sent.messageId === undefined)
      ctx.note(`not sent again: ${what} is ${sent.existing ?? 'known'} already (same request)`);
    else
      ctx.note(
        `enqueued ${what} (message ${sent.messageId})${sent.existing ? ` again: it is ${sent.existing}, and runs at most once` : ''}`,
      );
    const data = {
      jobId: sent.jobId,
      messageId: sent.messageId,
      type: job.type,
      workspaceId: job.workspaceId,
      tenantId: job.tenantId,
      status: sent.existing ?? 'QUEUED',
    };
    return { data, text: sent.jobId };
  },
};
