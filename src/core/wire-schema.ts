/**
 * The wire contract as JSON Schema, for producers and consumers in any language: made from the
 * zod schemas that validate the messages (zod 4's own conversion), so the documents cannot say
 * something the code does not. `npm run schema` writes them to contract/schema/; a test fails
 * when the files there differ from what this module makes.
 *
 * JSON Schema says what it can express: fields, types, lengths, patterns, which of diff, diffBase64
 * or diffRef. Rules it cannot (a branch git would misread, an http(s) URL without credentials, a
 * commit message git fsck refuses) are in each field's description, and the platform checks them
 * on receipt: a message that passes the schema can still be refused, with a reason naming the
 * field. Pure: it makes the documents, bin/wire-schema.ts writes them.
 */
import * as z from 'zod/mini';
import { outcomeEventDetailSchema, workspaceBlockedDetailSchema } from '../../contract/events';
import { JOB_TYPE_NAMES, JOB_TYPES, type JobType, type StagedJobType } from '../../contract/job-types';
import { dlqAttributesSchema } from '../../contract/messages';
import { MAX_MESSAGE_BYTES } from '../../contract/runtime-env';
import { envelopeSchemaOf, stageMessageSchemaOf } from './envelope';

/** Where the documents live, relative to the project root. */
export const WIRE_SCHEMA_DIR = 'contract/schema';

const STAGED_TYPES = JOB_TYPE_NAMES.filter((type): type is StagedJobType => JOB_TYPES[type].lane === 'staged');

/** One of several schemas by its `key` field; a single schema when there is one (a union needs two). */
function oneOf(key: string, schemas: readonly z.ZodMiniObject[]): z.ZodMiniType {
  const [first, second, ...rest] = schemas;
  if (!first) throw new Error('no schema to document');
  return second ? z.discriminatedUnion(key, [first, second, ...rest]) : first;
}

interface WireDocument {
  readonly title: string;
  readonly description: string;
  readonly schema: z.ZodMiniType;
}

const DOCUMENTS: Readonly<Record<string, () => WireDocument>> = {
  'job-envelope.schema.json': () => ({
    title: 'agent-jobs job envelope',
    description:
      `The body of a message on the FIFO queue (the stack output QueueUrlAgentJobs), one form per job type (${JOB_TYPE_NAMES.join(', ')}). ` +
      `Send it with MessageGroupId "ws#<workspaceId>", MessageDeduplicationId the lower-case hex sha256 of "<jobId>:<type>", and the String ` +
      `attributes jobId, workspaceId, tenantId and type; body and attributes together at most ${MAX_MESSAGE_BYTES} bytes.`,
    schema: oneOf(
      'type',
      JOB_TYPE_NAMES.map((type: JobType) => envelopeSchemaOf(type)),
    ),
  }),
  'stage-message.schema.json': () => ({
    title: 'agent-jobs stage message',
    description:
      'The body of a message on a stage queue: the job envelope and the commit the sequencer pinned it to. Only the sequencer sends these; ' +
      'a stage refuses one whose pin the ledger does not hold (UNPINNED).',
    schema: oneOf(
      'type',
      STAGED_TYPES.map((type) => stageMessageSchemaOf(type)),
    ),
  }),
  'outcome-event-detail.schema.json': () => ({
    title: 'agent-jobs outcome event detail',
    description:
      'The detail of the events AgentJobSucceeded, AgentJobFailed and AgentJobSkipped (source "agent-jobs", on the stack\'s event bus), ' +
      'published at least once when a job has its outcome.',
    schema: outcomeEventDetailSchema,
  }),
  'workspace-blocked-event-detail.schema.json': () => ({
    title: 'agent-jobs WorkspaceBlocked event detail',
    description:
      'The detail of the event WorkspaceBlocked (source "agent-jobs"): an apply_patch failed for good and the workspace\'s later jobs are skipped until an operator unblocks it.',
    schema: workspaceBlockedDetailSchema,
  }),
  'dlq-message-attributes.schema.json': () => ({
    title: 'agent-jobs DLQ message attributes',
    description:
      "The message attributes of a job's message on a DLQ, by name: each is a String attribute and the schema describes its StringValue. " +
      "The body is the job's message as it was sent. (A message sent without the job's attributes, or a build event on the build-events DLQ, has only what it carried and the reason.)",
    schema: dlqAttributesSchema,
  }),
};

/** Every document, by its file name in WIRE_SCHEMA_DIR, as the file's text. */
export function wireSchemaFiles(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(DOCUMENTS).map(([file, make]) => {
      const { title, description, schema } = make();
      // io input: what a producer writes (a URL before it is normalised).
      const converted = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' });
      const { $schema, ...rest } = converted;
      return [file, `${JSON.stringify({ $schema, title, description, ...rest }, null, 2)}\n`];
    }),
  );
}
