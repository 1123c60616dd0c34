/**
 * The words an agent reads when its MCP client lists the tools: each job type's tool reads as
 * English ("Send an apply_patch job"), and every payload field of a command stage says what it
 * does. Listed by the MCP SDK's own client over an in-memory transport (listing needs no platform).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { COMMAND_JOB_TYPES, JOB_TYPE_NAMES } from '../../contract/job-types';
import { createAgentJobsServer } from '../../tools/mcp/server';
import { connect, type OpenConnection } from '../../tools/operator';

type Tool = Awaited<ReturnType<Client['listTools']>>['tools'][number];

let stateDir: string;
let connection: OpenConnection;
let client: Client;
let tools: Tool[];

beforeAll(async () => {
  stateDir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-mcp-words-'));
  connection = connect({ stateDir });
  const server = createAgentJobsServer(connection, { version: 'test', cwd: stateDir });
  client = new Client({ name: 'mcp-tool-words', version: '1' });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
  tools = (await client.listTools()).tools;
});

afterAll(async () => {
  await client?.close();
  connection?.close();
  await rm(stateDir, { recursive: true, force: true });
});

const toolNamed = (name: string) => tools.find((t) => t.name === name);

it('names each job type with the article its sound takes, in the title and the description', () => {
  const expected: Record<string, string> = {
    apply_patch: 'Send an apply_patch job',
    run_tests: 'Send a run_tests job',
    run_lint: 'Send a run_lint job',
    open_pr: 'Send an open_pr job',
  };
  for (const [type, words] of Object.entries(expected)) {
    expect({
      type,
      title: toolNamed(type)?.title,
      description: toolNamed(type)?.description?.slice(0, words.length),
    }).toEqual({ type, title: words, description: words });
  }
  // Every job type of the catalog (a fork's too): "an" before a vowel, "a" before anything else.
  for (const type of JOB_TYPE_NAMES) expect(toolNamed(type)?.title).toMatch(/^Send (an [aeiou]|a [^aeiou])/i);
});

it("describes every payload field of a command stage's tool (command, profile, timeoutSeconds)", () => {
  for (const type of COMMAND_JOB_TYPES) {
    const payload = toolNamed(type)?.inputSchema.properties?.['payload'] as
      { properties?: Record<string, { description?: string }> } | undefined;
    const described = Object.fromEntries(
      Object.entries(payload?.properties ?? {}).map(([field, schema]) => [
        field,
        (schema.description ?? '').length > 0,
      ]),
    );
    expect({ type, described }).toEqual({ type, described: { command: true, profile: true, timeoutSeconds: true } });
  }
});

it('the README explains profile where it documents run_tests', async () => {
  const readme = await readFile(path.join(__dirname, '../../README.md'), 'utf8');
  // The lines that name it, not the whole README, when it is missing.
  expect(readme.split('\n').filter((line) => line.includes('`profile`')).length).toBeGreaterThan(0);
});
