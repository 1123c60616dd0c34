/**
 * The MCP SDK's own client driving `agent-jobs mcp` over stdio, as an agent runtime does: the
 * server is a child process it starts and stops. Everything the transport reports (a line on
 * stdout that is not JSON-RPC among them) is collected in `transportErrors`, which tests expect
 * empty: stdout belongs to the protocol.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema, type CallToolResult, type Progress } from '@modelcontextprotocol/sdk/types.js';
import * as path from 'node:path';

export const BIN = path.join(__dirname, '../../bin/agent-jobs.js');

export interface McpSession {
  readonly client: Client;
  readonly transportErrors: Error[];
  /** What the server wrote to stderr. */
  stderr(): string;
  /** Calls a tool; `progress` collects its progress notifications. */
  call(name: string, args: Record<string, unknown>, progress?: Progress[]): Promise<CallToolResult>;
  /** Calls a tool that must succeed, and returns its structured result. */
  result<T = Record<string, unknown>>(name: string, args: Record<string, unknown>, progress?: Progress[]): Promise<T>;
  /** The server's process id. */
  readonly pid: number | null;
  close(): Promise<void>;
}

export interface McpLaunch {
  /** Defaults to `node bin/agent-jobs.js mcp --state-dir <stateDir>`. */
  readonly command?: string;
  readonly args?: readonly string[];
  readonly stateDir?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

export async function startMcp(launch: McpLaunch): Promise<McpSession> {
  const command = launch.command ?? process.execPath;
  const args = launch.args ?? [BIN, 'mcp', ...(launch.stateDir ? ['--state-dir', launch.stateDir] : [])];
  const transport = new StdioClientTransport({
    command,
    args: [...args],
    env: { ...(process.env as Record<string, string>), NODE_NO_WARNINGS: '1', ...launch.env },
    cwd: launch.cwd,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const transportErrors: Error[] = [];
  const client = new Client({ name: 'agent-jobs-test', version: '1.0.0' });
  client.onerror = (error) => transportErrors.push(error);
  await client.connect(transport);
  const call = (name: string, args: Record<string, unknown>, progress?: Progress[]) =>
    client.callTool({ name, arguments: args }, CallToolResultSchema, {
      // A wait may outlast the SDK's 60 s default; its progress notifications keep the call alive.
      timeout: 120_000,
      resetTimeoutOnProgress: true,
      ...(progress ? { onprogress: (p: Progress) => void progress.push(p) } : {}),
    }) as Promise<CallToolResult>;
  return {
    client,
    transportErrors,
    stderr: () => stderr,
    call,
    async result<T>(name: string, args: Record<string, unknown>, progress?: Progress[]) {
      const answer = await call(name, args, progress);
      if (answer.isError)
        throw new Error(`${name} failed: ${JSON.stringify(answer.content)}\nserver stderr:\n${stderr}`);
      return answer.structuredContent as T;
    },
    pid: transport.pid,
    close: () => client.close(),
  };
}

/** The text of a tool result (what a model reads). */
export function resultText(result: CallToolResult): string {
  return result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}
