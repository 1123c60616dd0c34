/**
 * `mcp`: the platform as an MCP server over stdio, for the same target as every command (the
 * local platform, or `--stack`). An agent runtime starts it as a child process (README, "Agents
 * over MCP"). The server and the MCP SDK load only here, from a part of their own
 * (bin/cli-bundle.js), so no other command pays for them.
 */
import type { CommandSpec } from '../command';
import type { CliContext } from '../context';
import { cliVersion } from '../main';

// require(): see tools/operator/targets.ts.
const loadMcp = (): typeof import('../../mcp/server') => require('../../mcp/server');

export const mcpCommand: CommandSpec<CliContext> = {
  path: ['mcp'],
  summary:
    'serve the platform to an AI agent as an MCP server over stdio (one tool per job type, job status, waits, workspaces, test logs, recovery)',
  options: {
    workspace: {
      type: 'string',
      multiple: true,
      valueName: 'id',
      description:
        'act on this workspace only: every other is refused, naming the scope (default: $AGENT_JOBS_MCP_WORKSPACES, comma-separated, else every workspace of the target)',
    },
  },
  notes: [
    'Started by an MCP client, not by hand: stdin and stdout carry the protocol; notes go to stderr.',
    'Client configuration: {"mcpServers": {"agent-jobs": {"command": "agent-jobs", "args": ["mcp"]}}} (README, "Agents over MCP").',
  ],
  async run(ctx, { values }) {
    const flags = Array.isArray(values.workspace)
      ? values.workspace.filter((id): id is string => typeof id === 'string')
      : [];
    const workspaces = flags.length ? flags : (ctx.io.env.AGENT_JOBS_MCP_WORKSPACES ?? '').split(',');
    await loadMcp().serveStdio({
      where: { ...ctx.where, stateDir: ctx.stateDir },
      workspaces,
      version: cliVersion(),
      cwd: ctx.io.cwd,
      until: ctx.io.untilInterrupted(),
    });
    return { data: undefined, text: '' };
  },
};
