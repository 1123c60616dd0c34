/**
 * Error classes of the job pipeline. The pipeline classifies by class and cause, never by message
 * text: a PermanentJobError fails the job at once (ledger FAILED, message to the DLQ, acknowledged);
 * a TransientJobError is retried with back-off; any other error is retried only when its cause is
 * one a retry can cure (transient-cause.ts), else it fails the job at once as UNEXPECTED_ERROR.
 */

/** Why a job failed permanently: stable codes for operators, events and tests. */
export type PermanentReason =
  | 'INVALID_JOB'
  | 'CONFLICT'
  | 'UNSAFE_PATCH'
  | 'PATCH_DOES_NOT_APPLY'
  | 'BASE_MISMATCH'
  | 'BRANCH_DIVERGED'
  /** The workspace's branch does not exist on the remote. */
  | 'BRANCH_NOT_FOUND'
  | 'WORKSPACE_UNKNOWN'
  /** The job names another repository or branch than its workspace is bound to (by its first job). */
  | 'WORKSPACE_MISMATCH'
  /** The repository's host is not in the configured git hosts, or is an address the platform never dials. */
  | 'HOST_NOT_ALLOWED'
  | 'RETRIES_EXHAUSTED'
  | 'PREDECESSOR_UNFINISHED'
  | 'REJECTED_BY_TARGET'
  /** A stage message the sequencer never pinned (no record, another request, another pin): refused. */
  | 'UNPINNED'
  /** A command stage's build itself broke (FAULT, TIMED_OUT, STOPPED, a failed checkout): no verdict. */
  | 'TEST_RUN_ERROR'
  /** A message on the build-events queue that is not a build completion this platform can read. */
  | 'INVALID_BUILD_EVENT'
  /**
   * An error no rule names, whose cause a retry cannot cure (a TypeError, an AWS 4xx, a corrupt
   * object): failed on the delivery that met it instead of being retried until RETRIES_EXHAUSTED.
   */
  | 'UNEXPECTED_ERROR';

export class PermanentJobError extends Error {
  // string, not the literal: subclasses name themselves.
  override readonly name: string = 'PermanentJobError';
  constructor(
    readonly reason: PermanentReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** One field a job fails validation on: its path in the envelope (`payload.repo.url`) and why. */
export interface FieldIssue {
  readonly path: readonly string[];
  readonly message: string;
}

export class InvalidJobError extends PermanentJobError {
  constructor(
    message: string,
    /** Every field at fault, for callers that speak the user's words (the CLI names its flags). */
    readonly issues: readonly FieldIssue[] = [],
  ) {
    super('INVALID_JOB', message);
  }
}

/**
 * A permanent refusal that came before the job took its workspace turn (e.g. it names another
 * repository than the workspace is bound to): nothing reached the tree, so the sequencer does not
 * fence the workspace, and later jobs run.
 */
export class RefusedBeforeTurnError extends PermanentJobError {
  override readonly name = 'RefusedBeforeTurnError';
}

/** Worth retrying later: throttling, network, 5xx, a lease held by another live worker. */
export class TransientJobError extends Error {
  override readonly name = 'TransientJobError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The lease was taken over while this worker ran: it must not complete the job. */
export class LeaseLostError extends TransientJobError {}

/**
 * Another delivery holds the job's lease. Not this delivery's failure: it comes back when the
 * lease ends (a holder that died is then taken over), and it never exhausts the job's retries.
 */
export class LeaseHeldError extends TransientJobError {
  constructor(
    readonly jobId: string,
    /** Epoch milliseconds. */
    readonly leaseUntil: number,
  ) {
    super(`job ${jobId} is leased by another worker until ${new Date(leaseUntil).toISOString()}`);
  }
}

/** A missing or malformed setting: thrown at cold start, naming the setting. */
export class ConfigurationError extends Error {
  override readonly name = 'ConfigurationError';
}

export function errorMessage(value: unknown): string {
  return value instanceof Error ? value.message : String(value);
}
