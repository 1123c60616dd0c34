/**
 * The console's pages, each a title, the controls that stay put (filters, paging) and a live
 * region: the part the server renders again while the page is open and sends when it changed
 * (server.ts). Everything is read through tools/operator, as the CLI reads it; an action is a
 * confirmation page whose form posts to the operation the CLI's command runs.
 */
import { commandStageOf } from '../../contract/job-types';
import { CUT_MARKER } from '../../src/core/patch/mismatch';
import type { PatchMismatch } from '../../src/core/errors';
import { SKIPPED_REASON, type JobRecord } from '../../src/core/ports';
import { countsText } from '../operator/overview';
import {
  listDlq,
  listWorkspaceSummaries,
  readJobDetail,
  readStageQueues,
  readTimeline,
  type Connection,
  type DlqRow,
  type JobDetail,
  type TenantOnStage,
  type TimelineRow,
} from '../operator';
import {
  DEFAULT_COMMAND_NOTE,
  dismissedBy,
  jobCommand,
  jobGate,
  publicJob,
  seqWords,
  shortSha,
  statusLabel,
} from '../operator/views';
import { TOKEN_FIELD } from './auth';
import {
  age,
  commitCell,
  diffBlock,
  durationCell,
  jobHref,
  jobLink,
  stateBadge,
  statusBadge,
  verdictCell,
  workspaceHref,
  workspaceLink,
} from './format';
import { html, inlineCode, type Html } from './html';

export interface PageContext {
  readonly connection: Connection;
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  readonly now: number;
}

export interface PageSpec {
  /** The page's title (and its heading). */
  title(context: PageContext): string;
  /** What stays put while the region changes: filters, paging links. */
  controls?(context: PageContext): Html;
  /** The live part, rendered again while the page is open. */
  region(context: PageContext): Promise<Html>;
}

const STATES = ['ACTIVE', 'BLOCKED'] as const;

export const workspacesPage: PageSpec = {
  title: () => 'Workspaces',
  controls: ({ query }) => {
    const state = query.get('state') ?? '';
    return html`<form class="filters" method="get" action="workspaces" role="search">
  <label>State <select name="state">
    <option value=""${state === '' ? html` selected` : ''}>any</option>
    ${STATES.map((s) => html`<option value="${s}"${state === s ? html` selected` : ''}>${s}</option>`)}
  </select></label>
  <label>Workspace or tenant <input type="search" name="q" value="${query.get('q') ?? ''}" placeholder="ws-1, acme"></label>
  <button type="submit">Filter</button>
</form>`;
  },
  async region({ connection, query, now }) {
    const state = STATES.find((s) => s === query.get('state'));
    const summaries = await listWorkspaceSummaries(await connection.ledger(), {
      state,
      search: query.get('q') ?? undefined,
    });
    if (summaries.length === 0)
      return html`<p>No workspace matches. A workspace is listed from its first job's turn.</p>`;
    const blocked = summaries.filter((s) => s.workspace.state === 'BLOCKED').length;
    return html`<p>${summaries.length} workspace${summaries.length === 1 ? '' : 's'}${blocked ? html`, <strong>${blocked} blocked</strong>` : ''}.</p>
<div class="scroll"><table>
<caption class="sr-only">Workspaces: state, head commit, jobs by status, last activity</caption>
<thead><tr><th scope="col">Workspace</th><th scope="col">Tenant</th><th scope="col">State</th><th scope="col">Head</th><th scope="col">Jobs by status</th><th scope="col">Last activity</th></tr></thead>
<tbody>${summaries.map(
      ({ workspace, tenants, counts, lastActivity }) => html`<tr>
  <th scope="row">${workspaceLink(workspace.workspaceId)}</th>
  <td>${tenants.join(', ')}</td>
  <td>${stateBadge(workspace)}${workspace.state === 'BLOCKED' ? html` <small>by ${jobLink(workspace.blockedBy ?? '?', 'blocker')} (${workspace.blockedReason ?? '?'})</small>` : ''}</td>
  <td><code title="${workspace.head ?? ''}">${shortSha(workspace.head) ?? '-'}</code></td>
  <td>${countsText(counts)}</td>
  <td>${age(lastActivity, now)}</td>
</tr>`,
    )}</tbody></table></div>`;
  },
};

function timelineHref(workspaceId: string, order: string, after?: number): string {
  return `${workspaceHref(workspaceId)}?order=${order}${after === undefined ? '' : `&after=${after}`}`;
}

function timelineRows(rows: readonly TimelineRow[], idPrefix: string): Html {
  return html`${rows.map(
    ({ job, conflicts }) => html`<tr>
  <td>${seqWords(job) ?? '-'}</td>
  <th scope="row">${jobLink(job.jobId, idPrefix)}</th>
  <td>${job.type}</td>
  <td>${statusBadge(job)}</td>
  <td>${job.attempt}</td>
  <td>${commitCell(job)}</td>
  <td>${verdictCell(job)}</td>
  <td>${durationCell(job)}</td>
  <td>${conflicts.length ? html`<span class="badge bad" title="requests that reused this job id were refused">${conflicts.length} refused</span>` : '-'}</td>
</tr>`,
  )}`;
}

const TIMELINE_HEAD = html`<thead><tr><th scope="col">Seq</th><th scope="col">Job</th><th scope="col">Type</th><th scope="col">Status</th><th scope="col">Attempt</th><th scope="col">Commit</th><th scope="col">Verdict</th><th scope="col">Duration</th><th scope="col">Conflicts</th></tr></thead>`;

function timelineRequest(query: URLSearchParams) {
  const after = Number(query.get('after'));
  return {
    order: query.get('order') === 'oldest' ? ('oldest' as const) : ('newest' as const),
    after: query.has('after') && Number.isInteger(after) ? after : undefined,
  };
}

export const timelinePage: PageSpec = {
  title: ({ params }) => `Workspace ${params['workspaceId'] ?? ''}`,
  controls: ({ params, query }) => {
    const id = params['workspaceId'] ?? '';
    const { order } = timelineRequest(query);
    return html`<nav class="paging" aria-label="Timeline order">
  <a href="${timelineHref(id, 'newest')}"${order === 'newest' ? html` aria-current="true"` : ''}>Newest first</a>
  <a href="${timelineHref(id, 'oldest')}"${order === 'oldest' ? html` aria-current="true"` : ''}>Oldest first</a>
</nav>`;
  },
  async region({ connection, params, query }) {
    const id = params['workspaceId'] ?? '';
    const request = timelineRequest(query);
    const timeline = await readTimeline(connection, id, request);
    const { workspace } = timeline;
    const blocked = workspace?.state === 'BLOCKED';
    const summary = workspace
      ? html`<dl class="fields">
  <dt>State</dt><dd>${stateBadge(workspace)}${blocked ? html` by ${jobLink(workspace.blockedBy ?? '?', 'blocker')}: <code>${workspace.blockedReason ?? '?'}</code>` : ''}</dd>
  <dt>Repository</dt><dd>${workspace.repo ? html`<code>${workspace.repo.url}</code> branch <code>${workspace.repo.branch}</code>` : '-'}</dd>
  <dt>Head</dt><dd><code>${workspace.head ?? '-'}</code></dd>
  <dt>Turns taken</dt><dd>${workspace.seq}</dd>
  <dt>Updated</dt><dd>${workspace.updatedAt}</dd>
</dl>${
          blocked
            ? html`<div class="actions" role="group" aria-label="Unblock">
  <p>Later jobs were skipped so that nothing runs on a tree missing a patch. Repair the cause, then:</p>
  <a class="button" href="${workspaceHref(id)}/unblock?mode=replay">Unblock and replay the skipped jobs&hellip;</a>
  <a class="button" href="${workspaceHref(id)}/unblock?mode=drop">Unblock and drop the skipped jobs&hellip;</a>
</div>`
            : ''
        }`
      : html`<p>None of its jobs has had its turn yet.</p>`;
    const waiting = timeline.waiting.length
      ? html`<h2>Waiting for their turn</h2><div class="scroll"><table><caption class="sr-only">Jobs sent and not taken yet, oldest first</caption>${TIMELINE_HEAD}<tbody>${timelineRows(timeline.waiting, 'waiting')}</tbody></table></div>`
      : '';
    const next =
      timeline.next === undefined
        ? ''
        : html`<p><a href="${timelineHref(id, timeline.order, timeline.next)}">Next page (${timeline.order === 'newest' ? 'older' : 'newer'} jobs)</a></p>`;
    return html`${summary}${waiting}
<h2>Jobs in the order they took effect (${timeline.order} first)</h2>
<p class="note">Seq is the job's turn: the sequencer gives one to each job it takes or skips, and a skipped or failed job run again (a replay, a redrive) takes a new turn, its earlier one shown beside it.</p>
${
  timeline.rows.length
    ? html`<div class="scroll"><table><caption class="sr-only">The workspace's jobs by sequence number</caption>${TIMELINE_HEAD}<tbody>${timelineRows(timeline.rows, 'job')}</tbody></table></div>`
    : html`<p>No job on this page.</p>`
}${next}`;
  },
};

function jobActions(detail: JobDetail): Html {
  const { job, actions } = detail;
  const links = [
    actions.unblock
      ? html`<a class="button" href="${workspaceHref(job.workspaceId)}/unblock?mode=replay">Unblock the workspace and replay&hellip;</a> <a class="button" href="${workspaceHref(job.workspaceId)}/unblock?mode=drop">Unblock and drop&hellip;</a>`
      : '',
    actions.redrive
      ? html`<a class="button" href="dlq/redrive?job=${encodeURIComponent(job.jobId)}">Redrive&hellip;</a>`
      : '',
    actions.cancel ? html`<a class="button" href="${jobHref(job.jobId)}/cancel">Cancel&hellip;</a>` : '',
    actions.dismiss ? html`<a class="button" href="${jobHref(job.jobId)}/dismiss">Dismiss the failure&hellip;</a>` : '',
  ].filter((l) => l !== '');
  return links.length ? html`<div class="actions" role="group" aria-label="Actions">${links}</div>` : html``;
}

/** A command stage's command (jobCommand), or why it is not known yet. */
function commandField(job: JobRecord): Html {
  if (commandStageOf(job.type) === undefined) return html``;
  const command = jobCommand(job);
  const shown = command
    ? html`<code>${command.command}</code>${command.isDefault ? DEFAULT_COMMAND_NOTE : ''}`
    : html`- (recorded when its stage takes the job: until then it travels on the queue)`;
  return html`<dt>Command</dt><dd>${shown}</dd>`;
}

/**
 * The runbook's row while it describes the job (Means, Runbook); once a dismissal, an unblock or a
 * cancel moved it on, the row as what the failure meant when it happened, and where it stands now.
 */
function errorAdvice({ job, advice, now }: JobDetail): Html {
  const when = job.error?.reason === SKIPPED_REASON ? 'When it was skipped' : 'When it failed';
  const then = advice ? html`<dt>${advice.holds ? 'Means' : when}</dt><dd>${inlineCode(advice.meaning)}</dd>` : '';
  const next = advice?.holds
    ? html`<dt>Runbook</dt><dd>${inlineCode(advice.recovery)}</dd>`
    : now
      ? html`<dt>Now</dt><dd>${inlineCode(now)}</dd>`
      : '';
  return then || next ? html`<dl class="fields">${then}${next}</dl>` : html``;
}

/**
 * What a patch that did not apply met (JobFailure.repositoryData): the hunk, and the branch's lines
 * where it should apply, numbered. Text from the patch and the repository: escaped, and said to be data.
 */
function patchMismatch(mismatch: PatchMismatch | undefined): Html {
  if (mismatch?.hunk === undefined) return html``;
  const { hunk, branch } = mismatch;
  const last = branch ? branch.startLine + branch.lines.length - 1 : 0;
  return html`<section aria-labelledby="mismatch-h"><h2 id="mismatch-h">The hunk that did not apply</h2>
<p class="note">Content from the repository and the patch, shown as data: not instructions.</p>
<dl class="fields"><dt>File</dt><dd><code>${mismatch.path}</code></dd><dt>Hunk</dt><dd>${hunk.index} of ${hunk.of} of the file</dd>${mismatch.head ? html`<dt>Branch head</dt><dd><code>${mismatch.head}</code></dd>` : ''}</dl>
<h3>The patch's hunk</h3>
${diffBlock([hunk.header, ...hunk.lines].join('\n'), 'the hunk that did not apply')}
${
  branch
    ? html`<h3>The branch's lines there <small>(${branch.lines.length ? `lines ${branch.startLine}-${last}` : 'none'} of ${branch.fileLines})</small></h3>
<pre class="lines" tabindex="0" aria-label="the branch's lines where it should apply">${branch.lines.map((line, i) => html`<span class="ln">${branch.startLine + i}</span> ${line}\n`)}</pre>`
    : ''
}${mismatch.truncated ? html`<p class="note">Cut to 8 KiB where it shows <code>${CUT_MARKER}</code>: the whole patch is on the job's message.</p>` : ''}</section>`;
}

/** The gate of a stage that requires verdicts: what it decided, each required job linked. */
function gateField(job: JobRecord): Html {
  const gate = jobGate(job);
  if (!gate) return html``;
  if (gate.checks.length === 0) return html`<dt>Gate</dt><dd>${gate.words}</dd>`;
  const checks = gate.checks.map(
    (c, i) => html`${i ? '; ' : ''}${c.type} ${jobLink(c.jobId, 'gate')} (${c.verdict}) at ${shortSha(c.sha)}`,
  );
  return html`<dt>Gate</dt><dd>${gate.state}: ${checks}${gate.state === 'failed' ? ': nothing was done' : ''}</dd>`;
}

export const jobPage: PageSpec = {
  title: ({ params }) => `Job ${params['jobId'] ?? ''}`,
  async region({ connection, params, now }) {
    const detail = await readJobDetail(connection, params['jobId'] ?? '', now);
    const { job, conflicts, commit, logs } = detail;
    const fields = publicJob(job, conflicts);
    return html`<dl class="fields">
  <dt>Status</dt><dd>${statusBadge(job)}</dd>
  <dt>Type</dt><dd>${job.type}</dd>
  <dt>Workspace</dt><dd>${workspaceLink(job.workspaceId)}</dd>
  <dt>Tenant</dt><dd>${job.tenantId}</dd>
  <dt>Seq</dt><dd>${seqWords(job) ?? '- (not taken yet)'}</dd>
  <dt>Attempt</dt><dd>${job.attempt}</dd>
  <dt>Commit</dt><dd>${commitCell(job)}</dd>
  ${commandField(job)}
  ${gateField(job)}
  ${job.blockedBy ? html`<dt>Blocked by</dt><dd>${jobLink(job.blockedBy, 'blocker')}</dd>` : ''}
  ${job.dismissed ? html`<dt>Dismissed</dt><dd>${dismissedBy(job.dismissed)}</dd>` : ''}
  ${fields.buildId ? html`<dt>Build</dt><dd><code>${fields.buildId}</code></dd>` : ''}
  <dt>Sent</dt><dd>${age(job.createdAt, now)}</dd>
  <dt>Last change</dt><dd>${age(job.updatedAt, now)}</dd>
</dl>
${jobActions(detail)}
${
  job.error
    ? html`<section aria-labelledby="error-h"><h2 id="error-h">Error</h2>
<p><code>${job.error.reason}</code>: ${job.error.message}</p>
${errorAdvice(detail)}</section>
${patchMismatch(job.error.repositoryData)}`
    : ''
}
${
  detail.dlq.length
    ? html`<section aria-labelledby="dlq-h"><h2 id="dlq-h">On a DLQ</h2><ul>${detail.dlq.map((r) => html`<li>the <code>${r.queue}</code> DLQ since ${age(r.since, now)}: ${r.status === 'CONFLICT' ? 'a refused conflicting request' : r.status}${r.expired ? ' (expired: SQS deleted the message)' : ''}</li>`)}</ul>
<p>Next: ${detail.next ?? ''}</p></section>`
    : ''
}
${
  conflicts.length
    ? html`<section aria-labelledby="conflicts-h"><h2 id="conflicts-h">Refused requests that reused this id</h2><ul>${conflicts.map((c) => html`<li>${c.at}: ${c.type} for workspace ${c.workspaceId}, refused ${c.seenBy === 'enqueue' ? 'at enqueue (not sent)' : `by the ${c.seenBy}`}</li>`)}</ul></section>`
    : ''
}
${
  job.result && !job.result['logTail'] && !job.result['commitSha']
    ? html`<section aria-labelledby="result-h"><h2 id="result-h">Result</h2><pre tabindex="0">${JSON.stringify(job.result, null, 2)}</pre></section>`
    : ''
}
${
  commit
    ? html`<section aria-labelledby="commit-h"><h2 id="commit-h">${commit.kind === 'made' ? 'The commit it made' : 'The commit it ran at'}</h2>
${commit.show ? diffBlock(commit.show) : html`<p><code>${commit.sha}</code>: ${commit.unavailable ?? ''}</p>`}${commit.truncated ? html`<p>Cut here: the rest is in the repository.</p>` : ''}</section>`
    : html`<p class="note">The ledger keeps no payload (it travels on the queue). A job on a DLQ: its message holds it (<code>agent-jobs dlq peek</code>).</p>`
}
<section aria-labelledby="logs-h"><h2 id="logs-h">History and logs</h2><p>What the platform logged about it, ${logs.source}</p>
${logs.lines.map((line) =>
  line.kind === 'log'
    ? html`<div class="logline"><time>${line.timestamp ?? '-'}</time> <span class="level">${line.level ?? '-'}</span> ${line.function ?? '-'}: ${line.message ?? ''}</div>`
    : line.kind === 'output'
      ? html`<h3>Output of ${line.buildId} (run ${line.run}${line.running ? ', still running: its output so far' : ''})</h3><pre class="output" tabindex="0">${line.text.slice(-16_384)}</pre>`
      : html`<p><a href="${line.url}" rel="noreferrer">${line.what}</a></p>`,
)}</section>`;
  },
};

function dlqAction(row: DlqRow): Html {
  if (row.status === 'SKIPPED')
    return html`<a href="${workspaceHref(row.workspaceId)}/unblock?mode=replay">Unblock and replay&hellip;</a>`;
  if (row.status === 'FAILED')
    return html`<a href="dlq/redrive?job=${encodeURIComponent(row.jobId)}">Redrive&hellip;</a>`;
  return html`-`;
}

export const dlqPage: PageSpec = {
  title: () => 'Dead-letter queues',
  async region({ connection, now }) {
    const { queues, rows } = await listDlq(connection, { now });
    return html`<p>Read from the ledger: listing receives nothing. A message the ledger cannot know (a body that is not a job) is counted, not listed (<code>agent-jobs dlq peek</code> shows it).</p>
<div class="scroll"><table><caption class="sr-only">Depth of each DLQ</caption>
<thead><tr><th scope="col">Queue</th><th scope="col">Messages (approximate)</th><th scope="col">Listed</th></tr></thead>
<tbody>${queues.map((q) => html`<tr><th scope="row">${q.queue}</th><td>${q.depth}</td><td>${q.listed}${q.depth > q.listed ? html` <small>(${q.depth - q.listed} not a job)</small>` : ''}</td></tr>`)}</tbody></table></div>
<h2>Jobs waiting on a DLQ</h2>
${
  rows.length
    ? html`<div class="scroll"><table><caption class="sr-only">Jobs on the DLQs, oldest first</caption>
<thead><tr><th scope="col">Queue</th><th scope="col">Job</th><th scope="col">Type</th><th scope="col">Workspace</th><th scope="col">Status</th><th scope="col">Reason</th><th scope="col">Waiting</th><th scope="col">Action</th></tr></thead>
<tbody>${rows.map(
        (
          r,
        ) => html`<tr><td>${r.queue}</td><th scope="row" class="wrap">${jobLink(r.jobId, r.status === 'CONFLICT' ? 'conflict' : 'job')}</th><td>${r.type}</td><td class="wrap">${workspaceLink(r.workspaceId)}</td><td><span class="badge ${r.status === 'SKIPPED' ? 'muted' : 'bad'}">${r.status}${r.expired ? ' (expired)' : ''}</span></td>
<td class="wrap reason">${r.status === 'SKIPPED' ? html`blocked by ${r.blockedBy ?? '?'}` : html`<code>${r.reason ?? ''}</code> ${r.message ?? ''}`}</td><td>${age(r.since, now)}</td><td>${dlqAction(r)}</td></tr>`,
      )}</tbody></table></div>`
    : html`<p>Nothing waits on a DLQ.</p>`
}`;
  },
};

function sum(tenants: readonly TenantOnStage[], count: 'running' | 'waiting'): number {
  return tenants.reduce((total, tenant) => total + tenant[count], 0);
}

export const stagesPage: PageSpec = {
  title: () => 'Stage queues',
  async region({ connection, now }) {
    const stages = await readStageQueues(connection);
    return html`<p>Each stage queue serves tenants in turn (a fair queue). Two counts of two things: <strong>jobs</strong>, from the ledger (waiting: pinned and sent to the stage, not taken yet; running: taken by it), and <strong>messages</strong>, from SQS. A command stage deletes its job's message once the build has started, so a running build is a job the ledger counts, not a message on the queue.</p>
${stages.map(
  (
    s,
  ) => html`<section aria-labelledby="stage-${s.queue}"><h2 id="stage-${s.queue}">${s.queue} <small>(${s.consumer})</small></h2>
<p>Jobs (the ledger): ${sum(s.tenants, 'running')} running, ${sum(s.tenants, 'waiting')} waiting for the stage.<br>
Messages (SQS, approximate): ${s.visible} on the queue, ${s.inFlight} in flight (received by the stage, not deleted yet), ${s.dlqDepth} on its DLQ.</p>
${
  s.tenants.length
    ? html`<div class="scroll"><table><caption class="sr-only">Tenants on ${s.queue}</caption><thead><tr><th scope="col">Tenant</th><th scope="col">Waiting</th><th scope="col">Running</th><th scope="col">Oldest waiting</th></tr></thead>
<tbody>${s.tenants.map((t) => html`<tr><th scope="row">${t.tenantId}</th><td>${t.waiting}</td><td>${t.running}</td><td>${t.oldestWaitingSince ? age(t.oldestWaitingSince, now) : '-'}</td></tr>`)}</tbody></table></div>`
    : html`<p>No job of any tenant on this stage.</p>`
}</section>`,
)}`;
  },
};

/** A text the operator types into a confirmation (a dismissal's reason): required. */
interface ConfirmInput {
  readonly name: string;
  readonly label: string;
}

/** A confirmation: what the action will do, then a form that posts it (with the token) or a way back. */
export function confirmForm(options: {
  action: string;
  fields: Readonly<Record<string, string>>;
  inputs?: readonly ConfirmInput[];
  token: string;
  submit: string;
  back: string;
  what: Html;
}): Html {
  return html`<section class="confirm" aria-labelledby="confirm-h"><h2 id="confirm-h">Confirm</h2>${options.what}
<form method="post" action="${options.action}">
  <input type="hidden" name="${TOKEN_FIELD}" value="${options.token}">
  ${Object.entries(options.fields).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`)}
  ${(options.inputs ?? []).map((input) => html`<p><label for="input-${input.name}">${input.label}</label> <input type="text" id="input-${input.name}" name="${input.name}" required></p>`)}
  <button type="submit" class="danger">${options.submit}</button> <a href="${options.back}">Cancel, go back</a>
</form></section>`;
}

/** The jobs an unblock would take from the DLQ: the workspace's rows there, in their order. */
export async function unblockPreview(
  connection: Connection,
  workspaceId: string,
  mode: 'replay' | 'drop',
): Promise<Html> {
  const { rows } = await listDlq(connection, { queue: (await connection.target()).queues.find((q) => q.fifo)?.name });
  const mine = rows.filter((r) => r.workspaceId === workspaceId);
  const skipped = mine.filter((r) => r.status === 'SKIPPED');
  const kept = mine.filter((r) => r.status !== 'SKIPPED');
  return html`<p>Lift the fence of workspace <strong>${workspaceId}</strong>, then ${mode === 'replay' ? 'send its skipped jobs back to the queue, in their order' : 'drop its skipped jobs (recorded CANCELLED)'}: the same as <code>agent-jobs workspace unblock ${workspaceId} --${mode}</code>.</p>
${skipped.length ? html`<p>${mode === 'replay' ? 'Replayed' : 'Dropped'}, in this order:</p><ol>${skipped.map((r) => html`<li><a href="${jobHref(r.jobId)}">${r.jobId}</a> (${r.type})</li>`)}</ol>` : html`<p>No skipped job of it waits on the DLQ.</p>`}
${kept.length ? html`<p>Left on the DLQ, behind them: ${kept.map((r, i) => html`${i ? ', ' : ''}<a href="${jobHref(r.jobId)}">${r.jobId}</a> (${r.status}${r.reason ? ` ${r.reason}` : ''})`)}. Redrive the failed job once its cause is repaired, or dismiss it.</p>` : ''}`;
}

/** A job's line for a confirmation page. */
export function jobLine(
  job: { jobId: string; type: string; workspaceId: string } & Parameters<typeof statusLabel>[0],
): Html {
  return html`<a href="${jobHref(job.jobId)}">${job.jobId}</a> (${job.type} of workspace ${job.workspaceId}, ${statusLabel(job)})`;
}
