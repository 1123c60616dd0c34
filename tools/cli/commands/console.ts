/**
 * `console`: the operator's web console on 127.0.0.1, for the same target as every command (the
 * local platform, or `--stack`). The server and its pages (tools/console) load only here and in
 * `local up`, from a bundle of their own (bin/cli-bundle.js), so no other command pays for them.
 */
import { numberOption, type CommandSpec } from '../command';
import type { CliContext } from '../context';

// require(): see tools/operator/targets.ts.
const loadConsole = (): typeof import('../../console/server') => require('../../console/server');

export const consoleCommand: CommandSpec<CliContext> = {
  path: ['console'],
  summary:
    'serve the web console (workspaces, timelines, jobs, DLQs, stage queues; unblock, redrive, cancel) on 127.0.0.1 until Ctrl-C',
  options: { port: { type: 'string', valueName: 'n', description: 'port to listen on (default: a free port)' } },
  notes: [
    'Open the URL it prints: it carries the token every request needs (the console keeps it in a cookie).',
    'With --json: one JSON line {"url","openUrl"} when ready, and nothing else on stdout.',
  ],
  async run(ctx, { values }) {
    const port = numberOption(values, 'port', this.path) ?? 0;
    const interrupted = ctx.io.untilInterrupted();
    const server = await loadConsole().startConsole({ where: { ...ctx.where, stateDir: ctx.stateDir }, port });
    try {
      const target = await ctx.target().then(
        (t) => t.label,
        (error: unknown) => `a target not reachable yet (${(error as Error).message})`,
      );
      if (ctx.json) ctx.io.stdout(`${JSON.stringify({ url: server.url, openUrl: server.openUrl })}\n`);
      else ctx.io.stdout(`agent-jobs console for ${target}\n  open ${server.openUrl}\n  Ctrl-C to stop\n`);
      await interrupted;
    } finally {
      await server.close();
    }
    ctx.note('console stopped');
    return { data: undefined, text: '' };
  },
};
