/**
 * The local platform's terminal view: one line per job event as it lands in the event log, then a
 * compact tally of jobs by outcome per workspace. It reads the same JSON-lines log the CLI reads.
 * Events already in the log at start belong to an earlier run (whose in-memory ledger is gone), so
 * the view shows this run's events only.
 */
import type { Writable } from 'node:stream';
import type { JsonlEventLog, LoggedEvent } from '../adapters/events';

export interface LiveViewOptions {
  readonly events: JsonlEventLog;
  readonly output: Writable;
  /** @default 500 */
  readonly intervalMs?: number;
}

export interface LiveView {
  /** Prints what is still unread, then stops. */
  stop(): Promise<void>;
}

interface WorkspaceTally {
  readonly counts: Map<string, number>;
  blockedBy?: string;
}

export async function startLiveView(options: LiveViewOptions): Promise<LiveView> {
  const tallies = new Map<string, WorkspaceTally>();
  let offset = (await options.events.readFrom(0)).nextOffset;
  let reading: Promise<void> = Promise.resolve();

  const readNew = async () => {
    const { events, nextOffset } = await options.events.readFrom(offset);
    offset = nextOffset;
    if (events.length === 0) return;
    for (const event of events) {
      options.output.write(`${describeEvent(event)}\n`);
      tally(tallies, event);
    }
    options.output.write(`${formatTallies(tallies)}\n`);
  };
  // One read at a time: a slow read must not print the same events twice.
  const tick = () => {
    reading = reading.then(readNew).catch((error: unknown) => {
      options.output.write(`live view: cannot read the event log: ${String(error)}\n`);
    });
  };
  const timer = setInterval(tick, options.intervalMs ?? 500);
  return {
    async stop() {
      clearInterval(timer);
      tick();
      await reading;
    },
  };
}

/** `11:40:02  ws-1  apply_patch  <jobId>  SUCCEEDED` (plus the reason of a failure or skip). */
export function describeEvent(event: LoggedEvent): string {
  const time = event.time.slice(11, 19);
  const d = event.detail;
  if (event.type === 'WorkspaceBlocked') return `${time}  ${text(d['workspaceId'])}  BLOCKED by ${text(d['blockedBy'])} (${text(d['reason'])})`;
  const reason = d['reason'] === undefined ? '' : `  ${text(d['reason'])}`;
  return `${time}  ${text(d['workspaceId'])}  ${text(d['type'])}  ${text(d['jobId'])}  ${statusOf(event)}${reason}`;
}

/** `workspaces: ws-1 SUCCEEDED 3 FAILED 1 [BLOCKED by j] | ws-2 SUCCEEDED 5` */
export function formatTallies(tallies: ReadonlyMap<string, WorkspaceTally>): string {
  const parts = [...tallies].map(([workspaceId, t]) => {
    const counts = [...t.counts].map(([status, n]) => `${status} ${n}`).join(' ');
    return `${workspaceId} ${counts}${t.blockedBy ? ` [BLOCKED by ${t.blockedBy}]` : ''}`.trim();
  });
  return `workspaces: ${parts.join(' | ')}`;
}

function tally(tallies: Map<string, WorkspaceTally>, event: LoggedEvent): void {
  const workspaceId = text(event.detail['workspaceId']);
  const entry = tallies.get(workspaceId) ?? { counts: new Map<string, number>() };
  tallies.set(workspaceId, entry);
  if (event.type === 'WorkspaceBlocked') {
    entry.blockedBy = text(event.detail['blockedBy']);
    return;
  }
  const status = statusOf(event);
  entry.counts.set(status, (entry.counts.get(status) ?? 0) + 1);
}

const STATUS_BY_TYPE: Record<LoggedEvent['type'], string> = {
  AgentJobSucceeded: 'SUCCEEDED',
  AgentJobFailed: 'FAILED',
  AgentJobSkipped: 'SKIPPED',
  WorkspaceBlocked: 'BLOCKED',
};

/** The status the event carries (a forwarded job reports FORWARDED), else the one its type implies. */
function statusOf(event: LoggedEvent): string {
  const status = event.detail['status'];
  return typeof status === 'string' ? status : STATUS_BY_TYPE[event.type];
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '?';
}
