/**
 * A patch that is not a diff: every front door (the producer library, the CLI as a child process,
 * the MCP tool) parses the diff and refuses it before anything is sent or recorded; one sent around
 * them (straight to the queue) is refused by the sequencer as `INVALID_JOB`, and what the README's
 * failure table, the console's job page, `dlq show` and MCP's workspace_state say about it is what
 * happens: the workspace is not blocked, and sending again with a new job id applies.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { enqueueAgentJob } from '../../src/client/producer';
import { InvalidJobError } from '../../src/core/errors';
import { createAgentJobsServer } from '../../tools/mcp/server';
import { connect, runbookAdvice, type OpenConnection } from '../../tools/operator';
import { readJobDetail } from '../../tools/operator/job-detail';
import { applyPatchArgs, runCli } from '../e2e/harness';
import { receive } from '../support/drive-queue';
import { addFileDiff, applyPatchJob, gitIn, hostileSuite, type HostileSuite, type HostileWorkspace } from './harness';

jest.setTimeout(120_000);

const NOT_A_DIFF = 'this is not a diff';
/** What every front door and the sequencer say about it: the parser's own words. */
const NOT_A_DIFF_SAYS = /diff is not a valid unified diff: a file section has no ---\/\+\+\+ or diff --git header/;

const suite = hostileSuite();
let connection: OpenConnection;
let mcp: Client;

beforeAll(async () => {
  connection = connect({ stateDir: suite.stateDir() });
  const server = createAgentJobsServer(connection, { version: 'test', cwd: suite.stateDir() });
  mcp = new Client({ name: 'not-a-diff', version: '1' });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await Promise.all([server.connect(serverSide), mcp.connect(clientSide)]);
});

afterAll(async () => {
  await mcp?.close();
  connection?.close();
});

async function call(name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await mcp.callTool({ name, arguments: args })) as CallToolResult;
}

async function result<T>(name: string, args: Record<string, unknown>): Promise<T> {
  const answer = await call(name, args);
  if (answer.isError) throw new Error(`${name} failed: ${JSON.stringify(answer.content)}`);
  return answer.structuredContent as T;
}

const textOf = (answer: CallToolResult) => answer.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
const queueUrl = () => suite.emulators().queueUrls['agent-jobs'] as string;
const nothingSent = async () => expect(await receive(suite.emulators().clients.sqs, queueUrl())).toEqual([]);

function payloadFor(ws: HostileWorkspace, diff: string): Record<string, unknown> {
  return { repo: { url: ws.repoUrl, branch: 'main' }, diff, message: 'agent change' };
}

describe('a patch that is not a diff is refused at every front door, before it is sent', () => {
  it('the producer library: InvalidJobError naming payload.diff and the problem', async () => {
    const ws = await suite.newWorkspace();
    const sending = enqueueAgentJob(
      {
        type: 'apply_patch',
        jobId: 'producer-not-a-diff',
        workspaceId: ws.workspaceId,
        tenantId: 't',
        payload: payloadFor(ws, NOT_A_DIFF) as never,
      },
      { sqs: suite.emulators().clients.sqs, queueUrl: queueUrl() },
    );
    await expect(sending).rejects.toThrow(InvalidJobError);
    await expect(sending).rejects.toThrow(/payload\.diff: /);
    await expect(sending).rejects.toThrow(NOT_A_DIFF_SAYS);
    await nothingSent();
  });

  it('the CLI (enqueue --diff-file, a child process): exits non-zero naming --diff-file and the problem, nothing recorded', async () => {
    const ws = await suite.newWorkspace();
    const file = join(suite.stateDir(), 'not-a-diff.txt');
    await writeFile(file, `${NOT_A_DIFF}\n`);
    const run = await runCli([
      ...applyPatchArgs(ws.workspaceId, 'cli-not-a-diff', ws.repoUrl, 'main', file, 'agent change'),
      '--state-dir',
      suite.stateDir(),
    ]);
    expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 2, stdout: '' });
    expect(run.stderr).toMatch(/--diff-file: /);
    expect(run.stderr).toMatch(NOT_A_DIFF_SAYS);
    await nothingSent();
    expect(await suite.ledger().getJob('cli-not-a-diff')).toBeUndefined();
  });

  it('the MCP apply_patch tool: a tool error naming payload.diff and the problem, nothing recorded', async () => {
    const ws = await suite.newWorkspace();
    const answer = await call('apply_patch', {
      workspaceId: ws.workspaceId,
      jobId: 'mcp-not-a-diff',
      payload: payloadFor(ws, NOT_A_DIFF),
    });
    expect(answer.isError).toBe(true);
    expect(textOf(answer)).toMatch(/payload\.diff: /);
    expect(textOf(answer)).toMatch(NOT_A_DIFF_SAYS);
    await nothingSent();
    expect(await suite.ledger().getJob('mcp-not-a-diff')).toBeUndefined();
  });
});

describe('sent around the front doors, it fails as the README says, and its advice holds', () => {
  /** Puts the job straight on the queue, as a producer that skips validation would, and delivers it. */
  async function sendAroundTheFrontDoors(s: HostileSuite, ws: HostileWorkspace): Promise<string> {
    const message = applyPatchJob(ws, { diff: NOT_A_DIFF });
    await s.sendRaw(ws, message);
    expect(await s.deliverOnce()).toEqual({ batchItemFailures: [] });
    return message.jobId;
  }

  it('INVALID_JOB, the workspace not blocked; following the advice (a new job id) applies the patch', async () => {
    const ws = await suite.newWorkspace();
    const jobId = await sendAroundTheFrontDoors(suite, ws);

    const failed = await result<{ status: string; error: { reason: string; message: string } }>('job_status', {
      jobId,
    });
    expect(failed).toMatchObject({
      status: 'FAILED',
      error: { reason: 'INVALID_JOB', message: expect.stringMatching(NOT_A_DIFF_SAYS) },
    });

    // The runbook's row, as the README, the console and the CLI word it.
    const advice = runbookAdvice('INVALID_JOB');
    expect(advice?.meaning).toMatch(/the workspace is not blocked/);
    expect(advice?.recovery).toMatch(/send again with a new job id/);

    // What it says holds: the workspace is not blocked (MCP), and the console's job page gives the row as holding.
    const state = await result<Record<string, unknown>>('workspace_state', { workspaceId: ws.workspaceId });
    expect({ state: state['state'], blockedAdvice: state['blockedAdvice'] }).toEqual({
      state: 'ACTIVE',
      blockedAdvice: undefined,
    });
    const detail = await readJobDetail(connection, jobId);
    expect(detail.advice).toMatchObject({ reasons: ['INVALID_JOB'], holds: true });
    expect(detail.actions.unblock).toBe(false);
    // The DLQ's next step (dlq show, the console's job page) does not promise that a redrive runs it:
    // a redrive sends the same invalid request again.
    const shown = await suite.cli('dlq', 'show', jobId);
    expect(shown.stdout).toMatch(/next: .*send the work again, fixed, with a new job id/);
    expect(detail.next).not.toMatch(/"dlq redrive/);

    // Follow it: the fixed patch, sent again with a new job id, applies.
    const fixed = await result<{ jobId: string; status: string }>('apply_patch', {
      workspaceId: ws.workspaceId,
      jobId: `${jobId}-again`,
      payload: payloadFor(ws, addFileDiff('fixed.txt', ['sent again'])),
    });
    expect(fixed.status).toBe('QUEUED');
    expect(await suite.deliverOnce()).toEqual({ batchItemFailures: [] });
    expect(await result<{ status: string }>('job_status', { jobId: fixed.jobId })).toMatchObject({
      status: 'SUCCEEDED',
    });
    expect(await gitIn(ws.gitDir, 'show', 'main:fixed.txt')).toBe('sent again');
  });
});
