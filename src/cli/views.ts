/** What `status` and `workspace show` print for people: a record's fields, one per line. */
import { conflictQueueOf } from '../core/ledger';
import type { ConflictAttempt, JobRecord, WorkspaceRecord } from '../core/ports';
import { cancelledAfter, commandWords, conflictSummary, dismissedBy, jobCommand, resultSummary, seqWords, statusLabel } from '../operator/views';
import { fields } from './output';

function conflictLine(attempt: ConflictAttempt): string {
  const where = attempt.seenBy === 'enqueue' ? 'refused at enqueue (not sent)' : `refused by the ${attempt.seenBy}, on the ${conflictQueueOf(attempt.type, attempt.seenBy) ?? '?'} DLQ`;
  return `${attempt.at}  ${attempt.type} for workspace ${attempt.workspaceId}: ${where}`;
}

function commandLine(job: JobRecord): string | undefined {
  const command = jobCommand(job);
  return command && commandWords(command);
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
      ['blockedBy', job.blockedBy],
      ['error', job.error && job.status !== 'CANCELLED' ? `${job.error.reason}: ${job.error.message}` : undefined],
      ['before', cancelledAfter(job)],
      ['dismissed', job.dismissed ? dismissedBy(job.dismissed) : undefined],
      ['result', job.result ? resultSummary(job) : undefined],
      ['output', typeof job.result?.['logTail'] === 'string' ? job.result['logTail'].trimEnd() || undefined : undefined],
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
