/**
 * `agent-jobs mcp`: the platform as Model Context Protocol tools and resources, over stdio, with
 * the official TypeScript SDK. An agent runtime (Claude Code, Cursor, Codex CLI, an agent on an
 * MCP SDK) starts it as a child process and calls its tools; the server acts on the target the
 * CLI would (the local platform, or a deployed stack with the caller's AWS credentials) through
 * tools/operator, and adds transport, not rules.
 *
 * Stdout belongs to the protocol: nothing else may write there, so serveStdio sends the console's
 * output to stderr before anything else loads. No input stops the server: a tool that throws
 * returns a tool error (the SDK answers arguments its schema refuses the same way, naming the
 * field), a line that is not JSON-RPC is reported to stderr and skipped, and a line over the
 * request size limit is answered with an error naming it (request-lines.ts).
 *
 * In the CLI this module is a part of its own (bin/cli-bundle.js): the SDK loads for this command
 * only, and the command hands it plain values (a state directory, not a connection).
 */
import { format } from 'node:util';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { CallToolResult, JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { InvalidJobError } from '../../src/core/errors';
import { connect, decodeId, explainUnreachable, OperatorError, readTimeline, type Connection } from '../operator';
import type { ResolveOptions } from '../operator/targets';
import { MAX_REQUEST_LINE_BYTES, oversizedAnswer, RequestLines } from './request-lines';
import { McpScope } from './scope';
import { agentJobsTools, timelineView, type ToolContext, type ToolSpec } from './tools';

export const SERVER_NAME = 'agent-jobs';

/** The resource of a workspace's timeline, by its id. */
export const TIMELINE_URI = 'agent-jobs://workspaces/{workspaceId}/timeline';
const TIMELINE_PAGE = 50;

const INSTRUCTIONS = [
  'agent-jobs runs coding-agent jobs against a workspace (a branch of a git repository): each job type is a tool that sends one job and returns its id at once.',
  "Jobs of one workspace take effect in the order they were sent, each once: apply_patch commits a diff to the workspace's branch; a command stage (run_tests, ...) runs at the workspace's head commit when its turn comes; open_pr opens the pull request.",
  'A BLOCKED workspace is yours to recover: unblock_workspace replays or drops its skipped jobs, dismiss_job and redrive_jobs settle the job that failed, cancel_job ends a job not finished.',
  'Give each job your own jobId: a retried call with the same id enqueues once. Follow jobs with wait_for_jobs (it returns after its timeout: call it again), job_status and test_log; workspace_state and workspace_history say where the branch stands.',
].join(' ');

export interface McpServerOptions {
  /** The target, as plain values (the server connects itself). */
  readonly where: ResolveOptions;
  /** The server's version, as it introduces itself. */
  readonly version: string;
  /** The workspaces the server acts on (decisions §36). @default every workspace of the target */
  readonly workspaces?: readonly string[];
  /** Relative file paths in tool arguments are read from here. @default process.cwd() */
  readonly cwd?: string;
  /** Stops the server when it resolves (Ctrl-C, SIGTERM), as the client closing stdin does. */
  readonly until?: Promise<void>;
}

/** What a thrown error tells the agent: the message, by kind, and the fields at fault when it names them. */
async function toolError(error: unknown, connection: Connection): Promise<CallToolResult> {
  const explained = await explainUnreachable(error, connection);
  const message = explained instanceof Error ? explained.message : String(explained);
  const kind =
    explained instanceof OperatorError ? explained.kind : explained instanceof InvalidJobError ? 'invalid' : 'failed';
  const fields =
    explained instanceof InvalidJobError && explained.issues.length > 0
      ? { fields: explained.issues.map((i) => ({ field: i.path.join('.'), message: i.message })) }
      : {};
  return {
    isError: true,
    content: [{ type: 'text', text: message }],
    structuredContent: { error: { kind, message, ...fields } },
  };
}

function toolResult(result: Record<string, unknown>): CallToolResult {
  // Text for clients that read only text (the MCP spec asks for the JSON there too), structured for the others.
  return { content: [{ type: 'text', text: JSON.stringify(result, null, 2) }], structuredContent: result };
}

/** Who calls, as the ledger records an operator's act: the client's name from its initialize request. */
function actorOf(server: McpServer): string {
  const name = server.server.getClientVersion()?.name?.trim();
  return `${name ? name.slice(0, 200) : 'an unnamed client'} (mcp)`;
}

function register(server: McpServer, tool: ToolSpec, connection: Connection, cwd: string, scope: McpScope): void {
  server.registerTool(
    tool.name,
    {
      title: tool.title,
      description: tool.description,
      inputSchema: tool.input,
      annotations: { readOnlyHint: tool.readOnly, destructiveHint: tool.destructive ?? false, openWorldHint: false },
    },
    async (args: unknown, extra) => {
      const progressToken = extra._meta?.progressToken;
      const context: ToolContext = {
        connection,
        scope,
        actor: actorOf(server),
        cwd,
        signal: extra.signal,
        progress: async (progress, total, message) => {
          if (progressToken === undefined) return;
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken, progress, ...(total !== undefined && { total }), message },
          });
        },
      };
      try {
        return toolResult(await tool.run(args as never, context));
      } catch (error) {
        return toolError(error, connection);
      }
    },
  );
}

/** The server with every tool and resource, on `connection`; not connected to a transport yet. */
export function createAgentJobsServer(
  connection: Connection,
  options: { readonly version: string; readonly cwd: string; readonly scope?: McpScope },
): McpServer {
  const scope = options.scope ?? new McpScope();
  const server = new McpServer(
    { name: SERVER_NAME, version: options.version },
    { instructions: `${INSTRUCTIONS} This server acts on ${scope.describe()}.` },
  );
  for (const tool of agentJobsTools()) register(server, tool, connection, options.cwd, scope);

  const timelines = new ResourceTemplate(TIMELINE_URI, {
    list: async () => {
      const workspaces = (await (await connection.ledger()).listWorkspaces()).filter((ws) =>
        scope.includes(ws.workspaceId),
      );
      return {
        resources: workspaces.map((ws) => ({
          uri: TIMELINE_URI.replace('{workspaceId}', encodeURIComponent(ws.workspaceId)),
          name: `workspace ${ws.workspaceId}`,
          description: `${ws.state}${ws.head ? ` at ${ws.head.slice(0, 12)}` : ''}${ws.repo ? ` on ${ws.repo.branch}` : ''}`,
          mimeType: 'application/json',
        })),
      };
    },
  });
  server.registerResource(
    'workspace-timeline',
    timelines,
    {
      title: "A workspace's timeline",
      description: `Where a workspace's branch stands: its state and head, the jobs waiting for their turn, and its latest ${TIMELINE_PAGE} jobs, newest first (workspace_history pages further).`,
      mimeType: 'application/json',
    },
    async (uri, variables) => {
      const workspaceId = decodeId('workspaceId', String(variables['workspaceId'] ?? ''));
      scope.requireWorkspace(workspaceId);
      const timeline = await readTimeline(connection, workspaceId, { order: 'newest', limit: TIMELINE_PAGE });
      return {
        contents: [
          { uri: uri.href, mimeType: 'application/json', text: JSON.stringify(timelineView(timeline), null, 2) },
        ],
      };
    },
  );
  return server;
}

/**
 * Serves the platform over stdin/stdout until the client closes the connection (or stdin ends).
 * Everything the console would print goes to stderr, so stdout carries the protocol alone.
 */
export async function serveStdio(options: McpServerOptions): Promise<void> {
  keepStdoutForTheProtocol();
  const scope = new McpScope(options.workspaces);
  const connection = connect(options.where);
  const server = createAgentJobsServer(connection, {
    version: options.version,
    cwd: options.cwd ?? process.cwd(),
    scope,
  });
  // Whole lines of a bounded size reach the transport: an oversized one is answered, not fatal.
  const lines = new RequestLines(
    MAX_REQUEST_LINE_BYTES,
    (line) => void transport.send(oversizedAnswer(line, MAX_REQUEST_LINE_BYTES) as JSONRPCMessage),
  );
  const transport = new StdioServerTransport(process.stdin.pipe(lines), process.stdout, {
    maxBufferSize: MAX_REQUEST_LINE_BYTES + 1,
  });
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    // StdioServerTransport does not close when stdin ends: the client is gone, so the server is done.
    process.stdin.once('end', () => void server.close());
    void options.until?.then(() => server.close());
  });
  await server.connect(transport);
  // A line that is not JSON-RPC: reported and skipped (the transport reads on), never a crash.
  server.server.onerror = (error) => process.stderr.write(`agent-jobs mcp: ${error.message}\n`);
  try {
    await closed;
  } finally {
    // The transport paused the line reader only: stdin itself must stop, or it holds the process.
    process.stdin.unpipe(lines);
    process.stdin.pause();
    connection.close();
  }
}

/** console.log and its kin write to stderr: a library that logs must not corrupt the protocol. */
function keepStdoutForTheProtocol(): void {
  const toStderr = (...args: unknown[]) => void process.stderr.write(`${format(...args)}\n`);
  console.log = toStderr;
  console.info = toStderr;
  console.debug = toStderr;
}
