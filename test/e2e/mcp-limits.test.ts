/**
 * `agent-jobs mcp` at the edges of its input, as a child process over stdio against the local
 * platform: resource ids past the id rule, and requests larger than the transport reads. Each is
 * answered with a JSON-RPC error naming the rule, and the server goes on serving.
 */
import { spawn } from 'node:child_process';
import { MAX_DIFF_BYTES } from '../../contract/runtime-env';
import { eventually } from '../support/eventually';
import { BIN, startMcp, type McpSession } from '../support/mcp-client';
import { makeRepository, removeScratch, startPlatform, type RunningPlatform } from './harness';

jest.setTimeout(240_000);

let platform: RunningPlatform;
let mcp: McpSession;
let repoUrl: string;

beforeAll(async () => {
  platform = await startPlatform();
  mcp = await startMcp({ stateDir: platform.stateDir });
  const source = await makeRepository({ 'app.txt': 'one\n' }, ['large']);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'limits'])).url;
});

afterAll(async () => {
  await mcp?.close();
  await platform?.stop();
  await removeScratch();
});

test("a timeline resource's id with a malformed %-escape or past the id rule is an error naming the rule, and the server goes on", async () => {
  for (const workspaceId of ['%E0%A4%A', 'x'.repeat(8_000)]) {
    const read = mcp.client.readResource({ uri: `agent-jobs://workspaces/${workspaceId}/timeline` });
    await expect(read).rejects.toThrow(/malformed %-escape|workspaceId must be 1-64 characters/);
  }
  await expect(mcp.client.readResource({ uri: 'agent-jobs://workspaces/ws-none/timeline' })).rejects.toThrow(
    /workspace ws-none is not in the ledger/,
  );
  expect(mcp.transportErrors).toEqual([]);
});

/** A diff that adds one file of `bytes` bytes at most, in lines as source code has them. */
function largeDiff(bytes: number): string {
  const head = ['diff --git a/large.txt b/large.txt', 'new file mode 100644', '--- /dev/null', '+++ b/large.txt'].join(
    '\n',
  );
  const line = `+${'x'.repeat(99)}\n`;
  const lines = Math.floor((bytes - head.length - 32) / line.length);
  return `${head}\n@@ -0,0 +1,${lines} @@\n${line.repeat(lines)}`;
}

test('the largest inline diff the tools allow goes through the MCP SDK client, and the server stays up', async () => {
  const diff = largeDiff(MAX_DIFF_BYTES);
  expect(Buffer.byteLength(diff)).toBeLessThanOrEqual(MAX_DIFF_BYTES);
  expect(Buffer.byteLength(diff)).toBeGreaterThan(MAX_DIFF_BYTES - 200);
  const sent = await mcp.call('apply_patch', {
    workspaceId: 'ws-large',
    jobId: 'large-inline',
    payload: { repo: { url: repoUrl, branch: 'large' }, diff, message: 'A large file' },
  });
  expect({ isError: sent.isError ?? false, text: JSON.stringify(sent.content).slice(0, 300) }).toEqual({
    isError: false,
    text: expect.stringContaining('large-inline'),
  });
  await expect(mcp.result('job_status', { jobId: 'large-inline' })).resolves.toMatchObject({ jobId: 'large-inline' });
  expect(mcp.transportErrors).toEqual([]);
});

test('a request line over the limit is a JSON-RPC error naming the limit, and the next request is answered', async () => {
  const child = spawn(process.execPath, [BIN, 'mcp', '--state-dir', platform.stateDir], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  let exit: number | null | undefined;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', (code) => (exit = code));
  // A server that exits mid-write: the test reports what it answered, not the broken pipe.
  child.stdin.on('error', () => undefined);
  try {
    child.stdin.write(
      `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } })}\n`,
    );
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    const call = {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'job_status', arguments: { jobId: 'x'.repeat(60_000_000) } },
    };
    child.stdin.write(`${JSON.stringify(call)}\n`);
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' })}\n`);
    const answered = await eventually(
      async () => stdout,
      (text) => text.includes('"id":3') || exit !== undefined,
      { what: 'an answer to the ping after the oversized line', timeoutMs: 60_000, intervalMs: 100 },
    );
    const answers = answered
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: number | null; error?: { message: string } });
    expect({
      exit,
      stderr: stderr.slice(0, 300),
      answers: answers.map((a) => ({ id: a.id, error: a.error?.message })),
    }).toEqual({
      exit: undefined,
      stderr: expect.any(String),
      answers: [
        { id: 1, error: undefined },
        { id: 2, error: expect.stringMatching(/over the [\d,]+-byte limit/) },
        { id: 3, error: undefined },
      ],
    });
    // Stopped as a runtime stops it (SIGTERM, stdin still open): it exits.
    child.kill('SIGTERM');
    await exited;
  } finally {
    child.kill('SIGKILL');
  }
});
