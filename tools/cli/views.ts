/** What `status` and `workspace show` print for people: a record's fields, one per line. */
import { conflictQueueOf } from '../../src/core/ledger';
import type { PatchMismatch } from '../../src/core/errors';
import type { ConflictAttempt, JobRecord, WorkspaceRecord } from '../../src/core/ports';
import {
  cancelledAfter,
  commandWords,
  conflictSummary,
  dismissedBy,
  jobCommand,
  jobGate,
  resultSummary,
  seqWords,
  statusLabel,
} from '../operator/views';
import { fields } from './output';

function conflictLine(attempt: ConflictAttempt): string {
  const where =
    attempt.seenBy === 'enqueue'
      ? 'refused at enqueue (not sent)'
      : `refused by the ${attempt.seenBy}, on the ${conflictQueueOf(attempt.type, attempt.seenBy) ?? '?'} DLQ`;
  return `${attempt.at}  ${attempt.type} for workspace ${attempt.workspaceId}: ${where}`;
}

function commandLine(job: JobRecord): string | undefined {
  const command = jobCommand(job);
  return command && commandWords(command);
}

/** What a terminal would act on (controls but the tab, line and paragraph separators, bidirectional overrides). */
const TERMINAL_CONTROLS = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u2028-\u202e\u2066-\u2069]/g;

/** Text from a repository or a patch, as a terminal shows it: each control as its `\u` escape. */
function visible(text: string): string {
  return text.replace(TERMINAL_CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** What a patch that did not apply met (JobFailure.repositoryData): said to be data, every line visible. */
function mismatchLines(mismatch: PatchMismatch | undefined): string | undefined {
  if (mismatch === undefined) return undefined;
  const { hunk, branch } = mismatch;
  const lines = [`${visible(mismatch.path)}${mismatch.head ? ` at ${mismatch.head}` : ''}: ${mismatch.note}`];
  if (hunk) lines.push(`${hunk.header} (hunk ${hunk.index} of ${hunk.of})`, ...hunk.lines.map(visible));
  if (branch) {
    const shown = branch.lines.length
      ? `lines ${branch.startLine}-${branch.startLine + branch.lines.length - 1}`
      : 'no lines';
    lines.push(
      `the branch, ${shown} of ${branch.fileLines}:`,
      ...branch.lines.map((line, i) => `${branch.startLine + i} ${visible(line)}`),
    );
  }
  return lines.join('\n');
}

/** `status`: the record's fields, then the conflicting requests. */
export function jobFields(job: JobRecord, conflicts: readonly ConflictAttempt[] = []): string {
  const lines = [
    fields([
      ['jobId', job.jobId],
      ['type', job.type],
      ['status', statusLabel(job)],
      ['workspace', job.workspaceId],
      ['tenant', job.tenantId],
      ['seq', seqWords(job)],
      ['attempt', job.attempt],
      ['pin', job.pin?.sha],
      ['command', commandLine(job)],
      ['gate', jobGate(job)?.words],
      ['blockedBy', job.blockedBy],
      ['error', job.error && job.status !== 'CANCELLED' ? `${job.error.reason}: ${job.error.message}` : undefined],
      ['patch', job.status === 'FAILED' ? mismatchLines(job.error?.repositoryData) : undefined],
      ['before', cancelledAfter(job)],
      ['dismissed', job.dismissed ? dismissedBy(job.dismissed) : undefined],
      ['result', job.result ? resultSummary(job) : undefined],
      [
        'output',
        typeof job.result?.['logTail'] === 'string' ? job.result['logTail'].trimEnd() || undefined : undefined,
      ],
      ['build', job.progress?.['buildId']],
      ['created', job.createdAt],
      ['updated', job.updatedAt],
    ]),
  ];
  const summary = conflictSummary(conflicts);
  if (summary) lines.push(summary, ...conflicts.map((c) => `  ${conflictLine(c)}`));
  return lines.join('\n');
}

export function workspaceFields(ws: WorkspaceRecord): string {
  return fields([
    ['workspace', ws.workspaceId],
    ['state', ws.state],
    ['repo', ws.repo ? `${ws.repo.url} ${ws.repo.branch}` : undefined],
    ['head', ws.head],
    ['blockedBy', ws.blockedBy],
    ['reason', ws.blockedReason],
    ['seq', ws.seq],
    ['current', ws.currentJobId ? `${ws.currentJobId}${ws.currentDone ? ' (done)' : ' (running)'}` : undefined],
    ['updated', ws.updatedAt],
  ]);
}
