/**
 * Errors of the CLI. Each class carries its exit code, so main.ts maps a failure to a code
 * without matching message text. The codes are documented in the README ("Exit codes").
 */

/** Exit codes: scripts branch on these, so they never change meaning. */
export const EXIT = {
  ok: 0,
  /** The command ran and its outcome is a failure: a job failed, a conflict, a refused action. */
  failed: 1,
  /** Bad arguments or flags. */
  usage: 2,
  /** The job or workspace named is not in the ledger. */
  notFound: 3,
  /** `wait` gave up before every job finished. */
  timedOut: 4,
  /** The local platform or the stack cannot be reached or read. */
  unavailable: 5,
} as const;

export class CliError extends Error {
  override readonly name: string = 'CliError';
  readonly exitCode: number = EXIT.failed;
}

/** Bad arguments: exit code 2, like most Unix tools. The message is followed by the command's usage. */
export class UsageError extends CliError {
  override readonly name = 'UsageError';
  override readonly exitCode = EXIT.usage;
  constructor(
    message: string,
    /** The command whose usage to print; undefined prints the overview. */
    readonly commandPath?: readonly string[],
  ) {
    super(message);
  }
}

/** A job or workspace id the ledger does not know. */
export class NotFoundError extends CliError {
  override readonly name = 'NotFoundError';
  override readonly exitCode = EXIT.notFound;
}

/** The platform or stack to talk to cannot be found or read. */
export class TargetError extends CliError {
  override readonly name = 'TargetError';
  override readonly exitCode = EXIT.unavailable;
}

/** A command needs a part of the platform that is not built yet, or not on this target. */
export class NotAvailableError extends CliError {
  override readonly name = 'NotAvailableError';
}

/** The command ran but its outcome is a failure (a job failed, an action was refused): exit code 1. */
export class OutcomeError extends CliError {
  override readonly name = 'OutcomeError';
}
