/**
 * Workspaces as they are now, read from the ledger: each workspace record with its jobs and their
 * counts by current status. `agent-jobs workspaces` prints it; the local platform's live view
 * prints what changed in it; the console shows it. Counts are of jobs, not of events: a redriven job counts once, a
 * replayed or dropped SKIPPED job leaves SKIPPED, and a failing test run counts as its verdict.
 */
import type { JobRecord, Ledger, WorkspaceRecord, WorkspaceState } from '../../src/core/ports';
import { shortSha, statusLabel } from './views';

export interface WorkspaceOverview {
  readonly workspace: WorkspaceRecord;
  /** In the order the sequencer took them, then those not taken yet (cancelled before their turn among them). */
  readonly jobs: readonly JobRecord[];
}

/**
 * A workspace's jobs: those the sequencer took, in its order, then those not taken yet (QUEUED,
 * running their first attempt, or cancelled before their turn), oldest first.
 */
export async function workspaceJobs(ledger: Ledger, workspaceId: string): Promise<JobRecord[]> {
  const [taken, open] = await Promise.all([ledger.listWorkspaceJobs(workspaceId), ledger.listOpenJobs(workspaceId)]);
  const known = new Set(taken.map((j) => j.jobId));
  return [...taken, ...open.filter((j) => !known.has(j.jobId))];
}

/** Every workspace the ledger knows (a workspace is known from its first job's turn), by id. */
export async function readOverview(ledger: Ledger): Promise<WorkspaceOverview[]> {
  const workspaces = await ledger.listWorkspaces();
  const overview = await Promise.all(
    workspaces.map(async (workspace) => ({ workspace, jobs: await workspaceJobs(ledger, workspace.workspaceId) })),
  );
  return overview.sort((a, b) => a.workspace.workspaceId.localeCompare(b.workspace.workspaceId));
}

/** Jobs by their status label (`SUCCEEDED`, `tests failed`, `SKIPPED`, ...), in first-seen order. */
export function countByStatus(jobs: readonly JobRecord[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const job of jobs) {
    const label = statusLabel(job);
    counts[label] = (counts[label] ?? 0) + 1;
  }
  return counts;
}

/** `ACTIVE` or `BLOCKED by <jobId> (<reason>)`. */
export function workspaceState(ws: WorkspaceRecord): string {
  return ws.state === 'BLOCKED'
    ? `BLOCKED by ${ws.blockedBy ?? '?'}${ws.blockedReason ? ` (${ws.blockedReason})` : ''}`
    : ws.state;
}

/** `SUCCEEDED 3, FAILED 1` (or `no jobs`). */
export function countsText(counts: Readonly<Record<string, number>>): string {
  const parts = Object.entries(counts).map(([label, n]) => `${label} ${n}`);
  return parts.length ? parts.join(', ') : 'no jobs';
}

/** `ws-1 ACTIVE at 1a2b3c4d5e6f: SUCCEEDED 3, FAILED 1` */
export function overviewLine({ workspace, jobs }: WorkspaceOverview): string {
  const head = workspace.head ? ` at ${shortSha(workspace.head) ?? ''}` : '';
  return `${workspace.workspaceId} ${workspaceState(workspace)}${head}: ${countsText(countByStatus(jobs))}`;
}

export interface WorkspaceSummary {
  readonly workspace: WorkspaceRecord;
  /** The tenants its jobs came from (one, as a rule). */
  readonly tenants: readonly string[];
  /** Its jobs by status label (countByStatus). */
  readonly counts: Readonly<Record<string, number>>;
  /** The latest change to the workspace or one of its jobs (ISO-8601). */
  readonly lastActivity: string;
}

export interface WorkspaceFilter {
  readonly state?: WorkspaceState;
  /** Part of a workspace id or of a tenant id (case-insensitive). */
  readonly search?: string;
}

/** The summary of every workspace that passes the filter, by id (readOverview: each workspace's jobs are read). */
export async function listWorkspaceSummaries(
  ledger: Ledger,
  filter: WorkspaceFilter = {},
): Promise<WorkspaceSummary[]> {
  const search = filter.search?.trim().toLowerCase();
  return (await readOverview(ledger))
    .map(({ workspace, jobs }): WorkspaceSummary => ({
      workspace,
      tenants: [...new Set(jobs.map((j) => j.tenantId))].sort(),
      counts: countByStatus(jobs),
      lastActivity: jobs.reduce((latest, j) => (j.updatedAt > latest ? j.updatedAt : latest), workspace.updatedAt),
    }))
    .filter((s) => filter.state === undefined || s.workspace.state === filter.state)
    .filter(
      (s) =>
        !search ||
        s.workspace.workspaceId.toLowerCase().includes(search) ||
        s.tenants.some((t) => t.toLowerCase().includes(search)),
    );
}
