/** The producer library: what agents and the CLI import to put jobs on the queue. */
export { enqueueAgentJob, enqueueAgentJobs, newJobId, EnqueueError } from './producer';
export type { EnqueueOptions, EnqueueOutcome, EnqueueResult, JobRequest } from './producer';
