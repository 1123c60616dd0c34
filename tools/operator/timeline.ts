/**
 * A workspace's timeline: its jobs in the order they took effect, a page at a time from the
 * byWorkspace index (one query per page, whatever the workspace's size), with the refused
 * requests that reused each job's id, and the jobs not taken yet (its open list: small).
 */
import type { ConflictAttempt, JobRecord, WorkspaceRecord } from '../../src/core/ports';
import type { Connection } from './connection';
import { NotFoundError } from './errors';
import { requireValidId } from './ids';

/** Rows of a page unless asked otherwise; a page is one query. */
export const TIMELINE_PAGE_SIZE = 50;
/** The most rows a page may ask for. */
export const TIMELINE_MAX_PAGE_SIZE = 500;

export interface TimelineRequest {
  /** `newest` first (the default: what happened last is what an operator looks for) or `oldest`. */
  readonly order?: 'oldest' | 'newest';
  /** Continue after this sequence number, in the page's order (a page's `next`). */
  readonly after?: number;
  readonly limit?: number;
}

export interface TimelineRow {
  readonly job: JobRecord;
  readonly conflicts: readonly ConflictAttempt[];
}

export interface Timeline {
  /** Absent while none of its jobs has had its turn yet (a workspace is known from its first job's turn). */
  readonly workspace?: WorkspaceRecord;
  /** Jobs sent but not taken yet (QUEUED, their first attempt starting, or cancelled before their turn), oldest first. */
  readonly waiting: readonly TimelineRow[];
  readonly order: 'oldest' | 'newest';
  readonly rows: readonly TimelineRow[];
  /** The sequence number the next page continues after; absent on the last page. */
  readonly next?: number;
}

export async function readTimeline(
  connection: Connection,
  workspaceId: string,
  request: TimelineRequest = {},
): Promise<Timeline> {
  requireValidId('workspaceId', workspaceId);
  const ledger = await connection.ledger();
  const order = request.order ?? 'newest';
  const limit = Math.min(Math.max(1, Math.trunc(request.limit ?? TIMELINE_PAGE_SIZE)), TIMELINE_MAX_PAGE_SIZE);
  const [workspace, page, open] = await Promise.all([
    ledger.getWorkspace(workspaceId),
    ledger.pageWorkspaceJobs(workspaceId, { order, after: request.after, limit }),
    ledger.listOpenJobs(workspaceId),
  ]);
  // Open jobs the sequencer took (FORWARDED, RUNNING) are on the index: they show in their place.
  const waiting = open.filter((job) => job.wsSeq === undefined);
  if (!workspace && page.jobs.length === 0 && waiting.length === 0)
    throw new NotFoundError(`workspace ${workspaceId} is not in the ledger of ${(await connection.target()).label}`);
  const conflicts = await ledger.getConflictsOf([...waiting, ...page.jobs].map((job) => job.jobId));
  const row = (job: JobRecord): TimelineRow => ({ job, conflicts: conflicts.get(job.jobId) ?? [] });
  const last = page.jobs.at(-1);
  return {
    workspace,
    waiting: waiting.map(row),
    order,
    rows: page.jobs.map(row),
    next: page.more ? last?.wsSeq : undefined,
  };
}
