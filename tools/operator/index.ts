/**
 * The read model and the operations for people: one module that the CLI, the local platform's
 * live view and the console read and change the platform through, so none of them holds a rule of
 * its own. Every function takes a Connection (connect(): the local platform at a state directory,
 * or a deployed stack by name and region) and returns typed records; nothing here prints.
 *
 * Errors are OperatorError subclasses with a `kind` (errors.ts) for each surface to map: not
 * found, invalid, unavailable, or failed (a refused action). Public views (views.ts) are
 * allow-lists: the ledger's working fields never leave through them.
 */
export { connect, explainUnreachable, type Connection, type OpenConnection } from './connection';
export { decodeId, requireValidId } from './ids';
export {
  InvalidRequestError,
  NotAvailableError,
  NotFoundError,
  OperatorError,
  OutcomeError,
  TargetError,
  type ProblemKind,
} from './errors';
export { jobsQueue, type QueueEndpoint, type Target } from './targets';
export { countByStatus, readOverview, workspaceJobs, workspaceState, type WorkspaceOverview } from './overview';
export {
  aJobOfType,
  conflictSummary,
  jobSucceeded,
  jobSummary,
  publicConflict,
  publicJob,
  publicWorkspace,
  shortSha,
  statusLabel,
  type PublicConflict,
  type PublicJob,
} from './views';
export { cancelJob, listUnfinished, readJob, readJobs, requireJob, type Cancelled, type JobState } from './jobs';
export {
  listJobsOfWorkspace,
  readWorkspaceStanding,
  requireWorkspace,
  unblockWorkspace,
  type WorkspaceStanding,
  type Unblocked,
  type UnblockedJob,
  type UnblockMode,
} from './workspaces';
export {
  dismissalWords,
  dismissJob,
  dlqRows,
  listDlq,
  nextStep,
  peekDlq,
  redrive,
  selectQueues,
  showDlqJob,
  type Dismissal,
  type DlqJob,
  type DlqListing,
  type DlqRow,
  type PeekedMessage,
  type RedriveResult,
} from './dlq';
export { DEFAULT_TENANT, enqueueJob, type Enqueued } from './enqueue';
export { followRunOutput, readJobLogs, readRunOutputs, type JobLogs, type LogsLine } from './job-logs';
export { listWorkspaceSummaries, type WorkspaceFilter, type WorkspaceSummary } from './overview';
export { readTimeline, TIMELINE_PAGE_SIZE, type Timeline, type TimelineRequest, type TimelineRow } from './timeline';
export { readJobDetail, type JobCommit, type JobDetail } from './job-detail';
export { readStageQueues, type StageQueueView, type TenantOnStage } from './stages';
export { runbookAdvice, type RunbookAdvice } from './runbook';
export {
  jobFinished,
  progressLine,
  stateSucceeded,
  waitForJobs,
  WAIT_POLL_MS,
  type WaitOptions,
  type WaitOutcome,
  type WaitState,
} from './wait';
