/** The producer library: what agents and the CLI import to put jobs on the queue. */
export { enqueueAgentJob, enqueueAgentJobs, newJobId, EnqueueError } from './producer';
export type { EnqueueOptions, EnqueueOutcome, EnqueueResult, JobRequest } from './producer';
/** Where diffs over the inline limit go: the stack's diff bucket (output DiffBucketName). */
export { S3DiffStore } from '../adapters/diff-store';
