/**
 * The workspaces an MCP server acts on (decisions §36). A server started with `--workspace` (or
 * AGENT_JOBS_MCP_WORKSPACES) reads, sends to and recovers those workspaces only: every tool and the
 * timeline resource check the workspace of what they touch here, before anything is read back or
 * changed, and refuse the rest with an error naming the scope. A server started without one
 * reaches every workspace of its target, as the CLI does with the same credentials.
 */
import { requireValidId } from '../operator/ids';
import { OperatorError } from '../operator/errors';

/** A call outside the server's scope: refused before anything is read back or changed. */
export class OutOfScopeError extends OperatorError {
  override readonly name = 'OutOfScopeError';
}

export class McpScope {
  /** Undefined: every workspace of the target. */
  readonly workspaceIds: ReadonlySet<string> | undefined;

  /** `workspaceIds` empty or absent: every workspace. An id past the id rule is refused (InvalidRequestError). */
  constructor(workspaceIds: readonly string[] = []) {
    const ids = workspaceIds.map((id) => id.trim()).filter((id) => id !== '');
    for (const id of ids) requireValidId('workspaceId', id);
    this.workspaceIds = ids.length ? new Set(ids) : undefined;
  }

  /** The scope in words, as the refusals and the server's instructions name it. */
  describe(): string {
    return this.workspaceIds
      ? `workspace${this.workspaceIds.size > 1 ? 's' : ''} ${[...this.workspaceIds].join(', ')}`
      : 'every workspace of its target';
  }

  includes(workspaceId: string): boolean {
    return this.workspaceIds === undefined || this.workspaceIds.has(workspaceId);
  }

  /** Refuses a workspace outside the scope. */
  requireWorkspace(workspaceId: string): void {
    if (!this.includes(workspaceId))
      throw new OutOfScopeError(
        `workspace ${workspaceId} is outside this server's scope (${this.describe()}): it neither reads nor changes it`,
      );
  }

  /** Refuses a job of a workspace outside the scope, without saying which workspace that is. */
  requireJob(job: { readonly jobId: string; readonly workspaceId: string }): void {
    if (!this.includes(job.workspaceId))
      throw new OutOfScopeError(
        `job ${job.jobId} is not of a workspace in this server's scope (${this.describe()}): it neither reads nor changes it`,
      );
  }
}
