/**
 * The local platform's terminal view, read from the ledger: a line for each job and workspace
 * whose state changed since the last look, then one line of every workspace as it is now (state,
 * head, jobs by current status). It shows state, not history: a redriven job counts once, an
 * unblock, a drop or a cancel shows as the change it made, a test run shows its verdict.
 */
import type { Writable } from 'node:stream';
import { overviewLine, readOverview, workspaceState, type WorkspaceOverview } from '../operator/overview';
import { jobSummary, statusLabel } from '../operator/views';
import type { JobRecord, Ledger } from '../../src/core/ports';

export interface LiveViewOptions {
  readonly ledger: Ledger;
  readonly output: Writable;
  /**
   * How often the ledger is read. Each look reads every workspace's jobs: one operator's terminal
   * on the local emulator, where this costs a few milliseconds per workspace. @default 1000
   */
  readonly intervalMs?: number;
  /** @default the wall clock */
  readonly now?: () => Date;
}

export interface LiveView {
  /** Prints what changed since the last look, then stops. */
  stop(): Promise<void>;
}

/** What the view last showed: a line per job and a state per workspace, by id. */
export interface ViewSnapshot {
  readonly jobs: ReadonlyMap<string, string>;
  readonly workspaces: ReadonlyMap<string, string>;
}

export async function startLiveView(options: LiveViewOptions): Promise<LiveView> {
  const now = options.now ?? (() => new Date());
  const first = await readOverview(options.ledger);
  let shown = snapshotOf(first);
  // A persisted ledger: say where things stand before the first change.
  if (first.length > 0) options.output.write(`${stateLine(first)}\n`);
  let reading: Promise<void> = Promise.resolve();

  const look = async () => {
    const overview = await readOverview(options.ledger);
    const next = snapshotOf(overview);
    const changes = changedLines(shown, next);
    // A job cancelled before its turn leaves every list (it never got a place in the order): its
    // last state, read once by id.
    for (const jobId of shown.jobs.keys()) {
      const job = next.jobs.has(jobId) ? undefined : await options.ledger.getJob(jobId);
      if (job) changes.push(jobLine(job));
    }
    shown = next;
    if (changes.length === 0) return;
    const time = now().toISOString().slice(11, 19);
    options.output.write(`${changes.map((line) => `${time}  ${line}\n`).join('')}${stateLine(overview)}\n`);
  };
  // One look at a time: a slow read must not print the same change twice.
  const tick = () => {
    reading = reading.then(look).catch((error: unknown) => {
      options.output.write(`live view: cannot read the ledger: ${String(error)}\n`);
    });
  };
  const timer = setInterval(tick, options.intervalMs ?? 1000);
  return {
    async stop() {
      clearInterval(timer);
      tick();
      await reading;
    },
  };
}

/** `ws-1  apply_patch  p1  SUCCEEDED  commit 1a2b3c4d5e6f` */
export function jobLine(job: JobRecord): string {
  const summary = jobSummary(job);
  return `${job.workspaceId}  ${job.type}  ${job.jobId}  ${statusLabel(job)}${summary ? `  ${summary}` : ''}`;
}

export function snapshotOf(overview: readonly WorkspaceOverview[]): ViewSnapshot {
  return {
    jobs: new Map(overview.flatMap((o) => o.jobs.map((job) => [job.jobId, jobLine(job)] as const))),
    workspaces: new Map(overview.map((o) => [o.workspace.workspaceId, workspaceState(o.workspace)] as const)),
  };
}

/** The workspace and job lines that differ from what was shown (workspaces first). */
export function changedLines(before: ViewSnapshot, after: ViewSnapshot): string[] {
  const workspaces = [...after.workspaces].flatMap(([id, state]) => {
    const was = before.workspaces.get(id);
    if (was === state) return [];
    return [`${id}  ${state}${was?.startsWith('BLOCKED') ? ' (unblocked)' : ''}`];
  });
  const jobs = [...after.jobs].flatMap(([id, line]) => (before.jobs.get(id) === line ? [] : [line]));
  return [...workspaces, ...jobs];
}

/** `workspaces: ws-1 ACTIVE at 1a2b3c4d5e6f: SUCCEEDED 3 | ws-2 BLOCKED by j (REASON): FAILED 1, SKIPPED 2` */
export function stateLine(overview: readonly WorkspaceOverview[]): string {
  return `workspaces: ${overview.map(overviewLine).join(' | ')}`;
}
