/**
 * Ids as people and agents name them: the wire's id rule (ID_PATTERN) holds before the ledger is
 * read, which would otherwise answer an id past it with an error of its own (DynamoDB's key size,
 * for one). The CLI, the console and the MCP server all reach the ledger through these.
 */
import { idSchema } from '../../contract/job-types';
import { InvalidRequestError } from './errors';

/** A job or workspace id that breaks the id rule is InvalidRequestError, naming the rule. */
export function requireValidId(what: 'jobId' | 'workspaceId', id: string): void {
  const checked = idSchema(what).safeParse(id);
  if (!checked.success)
    throw new InvalidRequestError(
      `${checked.error.issues[0]?.message ?? `${what} is not an id`}: ${JSON.stringify(id.length > 80 ? `${id.slice(0, 80)}...` : id)}`,
    );
}

/** An id from a path segment or a URI: its %-escapes decoded, then the id rule checked. */
export function decodeId(what: 'jobId' | 'workspaceId', encoded: string): string {
  let id: string;
  try {
    id = decodeURIComponent(encoded);
  } catch {
    throw new InvalidRequestError(`${what} holds a malformed %-escape: ${JSON.stringify(encoded.slice(0, 80))}`);
  }
  requireValidId(what, id);
  return id;
}
