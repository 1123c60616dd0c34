/**
 * Errors of the CLI. Each class carries its exit code, so main.ts maps a failure to a code
 * without matching message text.
 */

export class CliError extends Error {
  override readonly name: string = 'CliError';
  readonly exitCode: number = 1;
}

/** Bad arguments: exit code 2, like most Unix tools. The message is followed by the command's usage. */
export class UsageError extends CliError {
  override readonly name = 'UsageError';
  override readonly exitCode = 2;
  constructor(
    message: string,
    /** The command whose usage to print; undefined prints the overview. */
    readonly commandPath?: readonly string[],
  ) {
    super(message);
  }
}

/** The platform or stack to talk to cannot be found or read. */
export class TargetError extends CliError {
  override readonly name = 'TargetError';
}

/** A command needs a part of the platform that is not built yet, or not on this target. */
export class NotAvailableError extends CliError {
  override readonly name = 'NotAvailableError';
}

/** The command ran but its outcome is a failure (a job failed, a wait timed out): exit code 1. */
export class OutcomeError extends CliError {
  override readonly name = 'OutcomeError';
}
