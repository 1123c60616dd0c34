/**
 * What went wrong with an operator's request, by kind, for every surface that reads or changes the
 * platform through this module: the CLI maps a kind to its exit code (tools/cli/errors.ts), the
 * console to an HTTP status, the MCP server to a tool error. Classes, not message text, carry the kind.
 */
/** `failed`: it ran and the outcome is a failure, or the action was refused; the others as named. */
export type ProblemKind = 'failed' | 'invalid' | 'notFound' | 'unavailable';

export class OperatorError extends Error {
  override readonly name: string = 'OperatorError';
  readonly kind: ProblemKind = 'failed';
}

/** A malformed request: an unknown queue name, a job that does not validate. */
export class InvalidRequestError extends OperatorError {
  override readonly name: string = 'InvalidRequestError';
  override readonly kind = 'invalid';
}

/** A job or workspace id the ledger does not know. */
export class NotFoundError extends OperatorError {
  override readonly name = 'NotFoundError';
  override readonly kind = 'notFound';
}

/** The platform or stack to talk to cannot be found or read. */
export class TargetError extends OperatorError {
  override readonly name = 'TargetError';
  override readonly kind = 'unavailable';
}

/** A request needs a part of the platform that is not built yet, or not on this target. */
export class NotAvailableError extends OperatorError {
  override readonly name = 'NotAvailableError';
}

/** The request ran but its outcome is a failure (a job failed, an action was refused). */
export class OutcomeError extends OperatorError {
  override readonly name = 'OutcomeError';
}
