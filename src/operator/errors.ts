/**
 * What went wrong with an operator's request, by kind, for every surface that reads or changes the
 * platform through this module: the CLI maps a kind to its exit code (src/cli/errors.ts), the
 * console to an HTTP status, the MCP server to a tool error. Classes, not message text, carry the kind.
 */
import type { Connection } from './connection';

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

/** Network errors that mean the platform or stack is not there (or not reachable from here). */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EAI_AGAIN']);

/** A network code anywhere in the error, its causes or its aggregated errors. */
function networkCode(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && UNREACHABLE.has(code)) return code;
  const inner = error instanceof AggregateError ? (error.errors as unknown[]) : [];
  for (const next of [error.cause, ...inner]) {
    const found = networkCode(next);
    if (found) return found;
  }
  return undefined;
}

/** An SDK call that could not connect becomes a TargetError naming what it tried to reach; any other error is returned as it is. */
export async function explainUnreachable(error: unknown, connection: Pick<Connection, 'target'>): Promise<unknown> {
  const code = networkCode(error);
  if (code === undefined || error instanceof OperatorError) return error;
  const label = await connection.target().then(
    (target) => target.label,
    () => 'the platform',
  );
  const hint = label.startsWith('local') ? 'is it running? (agent-jobs local up)' : 'check the region, the network and your credentials';
  return new TargetError(`cannot reach ${label}: ${code}: ${hint}`, { cause: error });
}
