/**
 * A throw-away command stage declared in a fixture catalog reaches the CLI, the MCP server and the
 * local platform with no other change (the template side is test/infra/catalog-extension.test.ts):
 * the CLI lists it and takes its flags from its payload schema, the MCP server has a tool for it
 * whose input is that schema, the platform makes its queue and runs it through the shared
 * command-stage processor and the child-process runner, and its verdict reads in its own words.
 * The CLI and the MCP server run in process (the MCP SDK's client over its in-memory transport) so
 * that they see the fixture.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { createAgentJobsServer } from '../../tools/mcp/server';
import { connect } from '../../tools/operator';
import { startPlatform, type LocalPlatform } from '../../tools/local/platform';
import { runCliInProcess, type InProcessResult } from '../support/in-process-cli';
import { applyPatchArgs, diffChain, makeRepository, removeScratch } from '../e2e/harness';

// The catalog with a throw-away command stage (test/support/catalog-with-check-format.ts); everything
// derived from it (topology, CLI, local platform, handlers) is the real code.
jest.mock('../../contract/job-types', () =>
  jest
    .requireActual<typeof import('../support/catalog-with-check-format')>('../support/catalog-with-check-format')
    .catalogWithCheckFormat('sh ./check-format.sh'),
);

jest.setTimeout(180_000);

let work: string;
let stateDir: string;
let platform: LocalPlatform;

/** The CLI, in process, against this test's platform. */
function cli(args: readonly string[]): Promise<InProcessResult> {
  return runCliInProcess(args, { stateDir: stateDir, cwd: work });
}

async function cliJson<T>(args: readonly string[]): Promise<T> {
  const { code, stdout, stderr } = await cli([...args, '--json']);
  if (code !== 0) throw new Error(`agent-jobs ${args.join(' ')} exited ${code}: ${stderr}`);
  return JSON.parse(stdout) as T;
}

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'agent-jobs-catalog-'));
  stateDir = path.join(work, 'state');
  platform = await startPlatform({ stateDir, output: null });
});

afterAll(async () => {
  await platform?.stop();
  await rm(work, { recursive: true, force: true });
  await removeScratch();
});

it('the CLI lists the new type with its summary and refuses a flag its payload schema lacks', async () => {
  const help = await cli(['enqueue', '--help']);
  expect(help.stdout).toMatch(/check_format\s+check the formatting at the pinned commit/);

  const refused = await cli(['enqueue', '--type', 'check_format', '--workspace', 'ws-format', '--base-branch', 'main']);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(/base-branch/);
});

it('the local platform makes its queue and runs it: its default command at the pinned commit, the verdict in its words', async () => {
  expect(platform.info.queueUrls['check-format']).toEqual(expect.any(String));
  const source = await makeRepository({
    'check-format.sh': 'grep -q "^formatted$" notes.txt\n',
    'notes.txt': 'draft\n',
  });
  const repoUrl = (await cliJson<{ url: string }>(['repo', 'import', source, '--name', 'formats'])).url;
  const [formatted] = await diffChain(source, [{ 'notes.txt': 'formatted\n' }]);
  await cliJson(applyPatchArgs('ws-format', 'format-patch', repoUrl, 'main', formatted ?? '', 'Format the notes'));
  await cliJson(['enqueue', '--type', 'check_format', '--workspace', 'ws-format', '--job-id', 'format-1']);
  await cliJson([
    'enqueue',
    '--type',
    'check_format',
    '--workspace',
    'ws-format',
    '--job-id',
    'format-2',
    '--command',
    'exit 3',
  ]);

  const waited = await cli(['wait', 'format-patch', 'format-1', 'format-2', '--timeout', '150']);
  // Exit code 1: every job finished, not all green (format-2's check failed).
  expect(waited.code).toBe(1);
  // The progress line names each job by its verdict, as the table does (not SUCCEEDED for a failed check).
  expect(waited.stderr).toMatch(/format-1=format check passed format-2=format check failed\n$/);

  const passed = await cliJson<{ status: string; result: Record<string, unknown> }>(['status', 'format-1']);
  expect(passed).toMatchObject({
    status: 'SUCCEEDED',
    result: { verdict: 'passed', summary: 'format check passed', exitCode: 0 },
  });
  const failed = await cliJson<{ status: string; result: Record<string, unknown> }>(['status', 'format-2']);
  expect(failed).toMatchObject({
    status: 'SUCCEEDED',
    result: { verdict: 'failed', summary: 'format check failed', exitCode: 3 },
  });
  expect((await cli(['status', 'format-2'])).stdout).toMatch(/^status\s+format check failed$/m);
});

it('the MCP server has a tool for it, taking its payload schema, that sends it and reads its verdict', async () => {
  const connection = connect({ stateDir });
  const server = createAgentJobsServer(connection, { version: 'test', cwd: work });
  const client = new Client({ name: 'catalog-extension', version: '1' });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
  try {
    const tool = (await client.listTools()).tools.find((t) => t.name === 'check_format');
    expect(tool?.description).toContain('check the formatting at the pinned commit');
    expect(
      Object.keys((tool?.inputSchema.properties?.['payload'] as { properties: object }).properties).sort(),
    ).toEqual(['command', 'profile', 'timeoutSeconds']);

    const refused = await client.callTool({
      name: 'check_format',
      arguments: { workspaceId: 'ws-format', payload: { baseBranch: 'main' } },
    });
    expect(refused).toMatchObject({
      isError: true,
      content: [{ text: expect.stringMatching(/Unrecognized key: "baseBranch"/) }],
    });

    await client.callTool({ name: 'check_format', arguments: { workspaceId: 'ws-format', jobId: 'format-mcp' } });
    const waited = await client.callTool(
      { name: 'wait_for_jobs', arguments: { jobIds: ['format-mcp'], timeoutSeconds: 150 } },
      undefined,
      { timeout: 160_000 },
    );
    expect(waited.structuredContent).toMatchObject({ allSucceeded: true, jobs: [{ label: 'format check passed' }] });
  } finally {
    await client.close();
    await server.close();
    connection.close();
  }
});
