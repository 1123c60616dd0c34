/**
 * `unfinished`: the jobs the ledger knows but that have no outcome (QUEUED, IN_FLIGHT, FORWARDED),
 * and SKIPPED jobs whose DLQ message is gone, so that no replay can run them.
 * After the local platform was killed, their messages are gone (queues live in memory) and these
 * are the jobs to send again, with the same job ids and payloads; re-sending a finished job is
 * harmless. Jobs sent without the ledger (the producer library without `ledger`) and never
 * delivered are not in it: only their sender knows them, which is why an agent re-sends every job
 * it has not seen finish.
 */
import { stringOption, type CommandSpec } from '../command';
import type { CliContext } from '../context';
import { table } from '../output';
import { listUnfinished } from '../../operator/jobs';
import { publicJob } from '../../operator/views';

export const unfinished: CommandSpec<CliContext> = {
  path: ['unfinished'],
  summary:
    'list jobs sent but without an outcome (e.g. after the local platform was killed) and skipped jobs nothing can replay',
  options: { workspace: { type: 'string', valueName: 'id', description: 'only this workspace' } },
  notes: [
    "Oldest first: re-send a workspace's jobs in this order, with the same job ids and payloads.",
    'Jobs sent without the ledger and never delivered are not in it: their sender must re-send them too.',
    'A SKIPPED job listed here has no message left on the DLQ: "workspace unblock <workspace> --drop" cancels it; send its work again under a new job id.',
  ],
  async run(ctx, { values }) {
    const list = await listUnfinished(ctx, stringOption(values, 'workspace'));
    const rows = list.map((j) => [j.jobId, j.workspaceId, j.type, j.status, j.attempt, j.updatedAt] as const);
    const stranded = new Set(list.filter((j) => j.status === 'SKIPPED').map((j) => j.workspaceId));
    const note = [...stranded].map(
      (ws) =>
        `SKIPPED in ${ws}: no message left to replay: "workspace unblock ${ws} --drop" cancels them; send their work again under new job ids`,
    );
    return {
      data: list.map((j) => publicJob(j)),
      text: list.length
        ? [table(['JOB', 'WORKSPACE', 'TYPE', 'STATUS', 'ATTEMPT', 'SINCE'], rows), ...note].join('\n')
        : 'no unfinished jobs',
    };
  },
};
