/** Small pieces of the console's pages: times, ages, durations, statuses, ids as links, diffs. */
import type { JobRecord, WorkspaceRecord } from '../../src/core/ports';
import { shortSha, statusLabel } from '../operator/views';
import { html, type Html } from './html';

// Links are relative: each page's <base> is the console's root (auth.ts), a path of its own.
export function jobHref(jobId: string): string {
  return `jobs/${encodeURIComponent(jobId)}`;
}

export function workspaceHref(workspaceId: string): string {
  return `workspaces/${encodeURIComponent(workspaceId)}`;
}

/** A link to a job; its id attribute lets the page keep focus on it when the live region is redrawn. */
export function jobLink(jobId: string, idPrefix = 'job'): Html {
  return html`<a id="${idPrefix}-${jobId}" href="${jobHref(jobId)}">${jobId}</a>`;
}

export function workspaceLink(workspaceId: string): Html {
  return html`<a id="ws-${workspaceId}" href="${workspaceHref(workspaceId)}">${workspaceId}</a>`;
}

/** `12 s`, `4 min`, `3 h`, `2 d`. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} d`;
}

/** An age to the minute (`under a minute`, `4 min`, `3 h`, `2 d`): a live region that shows it changes once a minute, not at every read. */
export function coarseAge(ms: number): string {
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 1) return 'under a minute';
  if (minutes < 120) return `${minutes} min`;
  return minutes < 2880 ? `${Math.floor(minutes / 60)} h` : `${Math.floor(minutes / 1440)} d`;
}

/** A time as `<time>`: its age for people, the instant for machines and on hover. */
export function age(iso: string | undefined, now: number): Html {
  if (!iso) return html`-`;
  return html`<time datetime="${iso}" title="${iso}">${coarseAge(now - Date.parse(iso))} ago</time>`;
}

/** How a status reads on a page: its label, and a class for its colour (never colour alone: the words are there). */
export function statusBadge(job: Pick<JobRecord, 'status' | 'result' | 'type'>): Html {
  const label = statusLabel(job);
  const failed = job.status === 'FAILED' || (job.status === 'SUCCEEDED' && job.result?.['verdict'] === 'failed');
  const tone = failed
    ? 'bad'
    : job.status === 'SUCCEEDED'
      ? 'good'
      : job.status === 'SKIPPED' || job.status === 'CANCELLED'
        ? 'muted'
        : 'busy';
  return html`<span class="badge ${tone}">${label}</span>`;
}

export function stateBadge(workspace: Pick<WorkspaceRecord, 'state'>): Html {
  return html`<span class="badge ${workspace.state === 'BLOCKED' ? 'bad' : 'good'}">${workspace.state}</span>`;
}

/** The commit a job made (apply_patch) or ran at (a staged job, pinned by the sequencer). */
export function commitCell(job: JobRecord): Html {
  const made = typeof job.result?.['commitSha'] === 'string' ? (job.result['commitSha'] as string) : undefined;
  if (made)
    return html`<code title="${made}">${shortSha(made)}</code>${job.result?.['alreadyApplied'] === true ? html` <small>(already on the branch)</small>` : ''}`;
  if (job.pin) return html`<small>at</small> <code title="pinned to ${job.pin.sha}">${shortSha(job.pin.sha)}</code>`;
  return html`-`;
}

/** A command stage's verdict in its words, or the reason a job failed or was skipped. */
export function verdictCell(job: JobRecord): Html {
  const summary = job.result?.['summary'];
  if (typeof summary === 'string') return html`${summary}`;
  if (job.error) return html`<code>${job.error.reason}</code>${job.dismissed ? html` <small>(dismissed)</small>` : ''}`;
  if (job.result?.['url'])
    return html`<a href="${String(job.result['url'])}" rel="noreferrer">PR #${String(job.result['number'] ?? '?')}</a>`;
  return html`-`;
}

/**
 * The work itself: a command stage's run, else a finished job's last attempt, from its worker's
 * claim to its outcome (never from the first send: a replayed or redriven job waited in between).
 */
export function durationCell(job: JobRecord): Html {
  const ran = job.result?.['durationMs'];
  if (typeof ran === 'number') return html`<span title="the command's run">${duration(ran)}</span>`;
  const finished = job.status === 'SUCCEEDED' || job.status === 'FAILED';
  if (finished && job.startedAt)
    return html`<span title="its last attempt, from its start to its outcome">${duration(Date.parse(job.updatedAt) - Date.parse(job.startedAt))}</span>`;
  return html`-`;
}

/** `git show` output (or a hunk) with its diff lines marked, for a page (classes, and the +/- that stay in the text). */
export function diffBlock(text: string, label = 'the commit and its diff'): Html {
  const lines = text.split('\n').map((line) => {
    const kind =
      line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff --git')
        ? 'file'
        : line.startsWith('+')
          ? 'add'
          : line.startsWith('-')
            ? 'del'
            : line.startsWith('@@')
              ? 'hunk'
              : '';
    return kind ? html`<span class="${kind}">${line}</span>\n` : html`${line}\n`;
  });
  return html`<pre class="diff" tabindex="0" aria-label="${label}">${lines}</pre>`;
}
