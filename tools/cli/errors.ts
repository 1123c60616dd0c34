/**
 * Exit codes of the CLI: each kind of operator error (tools/operator/errors.ts) has its code, so
 * main.ts maps a failure to a code without matching message text; the CLI adds its own usage
 * error. The codes are documented in the README ("Exit codes").
 */
import { InvalidRequestError, type ProblemKind } from '../operator/errors';

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

/** The exit code of each kind of operator error. */
export const EXIT_OF_KIND: Readonly<Record<ProblemKind, number>> = {
  failed: EXIT.failed,
  invalid: EXIT.usage,
  notFound: EXIT.notFound,
  unavailable: EXIT.unavailable,
};

/** Bad arguments: exit code 2, like most Unix tools. The message is followed by the command's usage. */
export class UsageError extends InvalidRequestError {
  override readonly name = 'UsageError';
  constructor(
    message: string,
    /** The command whose usage to print; undefined prints the overview. */
    readonly commandPath?: readonly string[],
  ) {
    super(message);
  }
}
