/**
 * `agent-jobs mcp` at the edges of its input, as a child process over stdio against the local
 * platform: resource ids past the id rule, and requests larger than the transport reads. Each is
 * answered with a JSON-RPC error naming the rule, and the server goes on serving.
 */
import { startMcp, type McpSession } from '../support/mcp-client';
import { removeScratch, startPlatform, type RunningPlatform } from './harness';

jest.setTimeout(240_000);

let platform: RunningPlatform;
let mcp: McpSession;

beforeAll(async () => {
  platform = await startPlatform();
  mcp = await startMcp({ stateDir: platform.stateDir });
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
  await expect(mcp.client.readResource({ uri: 'agent-jobs://workspaces/ws-none/timeline' })).rejects.toThrow(/workspace ws-none is not in the ledger/);
  expect(mcp.transportErrors).toEqual([]);
});
