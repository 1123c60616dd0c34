/**
 * `unfinished`: the jobs the ledger saw but that have no outcome (IN_FLIGHT, FORWARDED). After the
 * local platform was killed, their messages are gone (queues live in memory) and these are the
 * jobs to send again, with the same job ids and payloads; re-sending a finished job is harmless.
 * Jobs that were still queued and never delivered are not in the ledger: only their sender knows
 * them, which is why an agent re-sends every job it has not seen finish.
 */
import { stringOption, type CommandSpec } from '../command';
import type { CliContext } from '../context';
import { table } from '../output';

export const unfinished: CommandSpec<CliContext> = {
  path: ['unfinished'],
  summary: 'list jobs delivered but without an outcome (e.g. after the local platform was killed): send them again',
  options: { workspace: { type: 'string', valueName: 'id', description: 'only this workspace' } },
  notes: [
    'Oldest first: re-send a workspace\'s jobs in this order, with the same job ids and payloads.',
    'Jobs never delivered are not in the ledger: their sender must re-send them too.',
  ],
  async run(ctx, { values }) {
    const workspaceId = stringOption(values, 'workspace');
    const list = (await (await ctx.ledger()).listUnfinished()).filter((j) => workspaceId === undefined || j.workspaceId === workspaceId);
    const rows = list.map((j) => [j.jobId, j.workspaceId, j.type, j.status, j.attempt, j.updatedAt] as const);
    return { data: list, text: list.length ? table(['JOB', 'WORKSPACE', 'TYPE', 'STATUS', 'ATTEMPT', 'SINCE'], rows) : 'no unfinished jobs' };
  },
};
