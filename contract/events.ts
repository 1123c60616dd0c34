/**
 * The `detail` of the events the platform publishes (EventBridge on AWS, the local platform's event
 * log), as schemas: what a consumer of the bus may rely on. src/core/pipeline.ts builds each
 * outcome's detail to this shape, and the wire JSON Schema (contract/schema/) is made from it.
 * Details carry ids and outcomes, never payloads: diffs can hold secrets.
 */
import * as z from 'zod/mini';
import { idSchema, JOB_TYPE_NAMES, type JobType } from './job-types';
import { reasonCodeSchema } from './messages';
import './zod-english';

const outcomeFields = {
  jobId: idSchema('jobId').check(z.describe('The id the job was sent with.')),
  workspaceId: idSchema('workspaceId').check(z.describe("The job's workspace.")),
  tenantId: idSchema('tenantId').check(z.describe('The tenant the job is for.')),
  type: z.enum(JOB_TYPE_NAMES as [JobType, ...JobType[]]).check(z.describe('The job type.')),
  attempt: z
    .int()
    .check(
      z.nonnegative(),
      z.describe('Deliveries of the job to the worker that started it (0: it failed before it was claimed).'),
    ),
};

/** AgentJobSucceeded, AgentJobFailed, AgentJobSkipped: a job's outcome, once it has one (at least once). */
export const outcomeEventDetailSchema = z.discriminatedUnion('status', [
  z.strictObject({
    ...outcomeFields,
    status: z.literal('SUCCEEDED'),
    result: z
      .record(z.string(), z.unknown())
      .check(
        z.describe(
          "The job type's result: commitSha (apply_patch), verdict and exitCode (a command stage), url and number (open_pr).",
        ),
      ),
  }),
  z.strictObject({
    ...outcomeFields,
    status: z.literal('FAILED'),
    reason: reasonCodeSchema,
    message: z.string().check(z.describe('What went wrong, in words.')),
  }),
  z.strictObject({
    ...outcomeFields,
    status: z.literal('SKIPPED'),
    reason: reasonCodeSchema,
    blockedBy: z.string().check(z.describe('The job whose failure blocked the workspace.')),
  }),
]);
export type OutcomeEventDetail = z.infer<typeof outcomeEventDetailSchema>;

/** WorkspaceBlocked: an apply_patch failed for good and its workspace's later jobs are skipped until an operator unblocks it. */
export const workspaceBlockedDetailSchema = z.strictObject({
  workspaceId: idSchema('workspaceId').check(z.describe('The workspace now BLOCKED.')),
  blockedBy: idSchema('blockedBy').check(z.describe('The apply_patch job whose failure blocked it.')),
  reason: reasonCodeSchema,
});
export type WorkspaceBlockedDetail = z.infer<typeof workspaceBlockedDetailSchema>;
