/**
 * What a chaos run must end with, checked from the outside: the git remotes read with the git CLI,
 * the ledger table scanned, the event log, every DLQ drained, the lines the test commands printed
 * (each run's kept output), the GitHub stand-in's pull requests, the machine's processes and
 * directories. Never the platform's own counters.
 *
 * - terminal: every job ends SUCCEEDED, FAILED with a reason, SKIPPED with its cause, or CANCELLED.
 * - fence: a workspace is BLOCKED exactly by its first job that failed at the sequencer; nothing
 *   after that job succeeded, nothing before it was skipped.
 * - commits: per workspace exactly one commit per applied patch, in send order, carrying its trailer.
 *   A patch job that gave up (GAVE_UP) may have pushed before it did: its commit, if there, counts
 *   as applied (a redrive records it so; test/integration/sequencer.test.ts).
 * - tree: each branch's tree is the tree `git apply` builds from the same patches.
 * - test-runs: at most one run per job, at the commit pinned at its turn, with the expected verdict.
 * - pull-requests: at most one per workspace branch; every open_pr job names it.
 * - dlq: every FAILED or SKIPPED job, poison message and reused id is on its DLQ with its ids and reason;
 *   nothing that succeeded is.
 * - events: every outcome is announced, and no event contradicts the ledger.
 * - fsck: every repository passes `git fsck --strict`.
 * - leftovers: nothing of a test run outlives it, not even a run whose platform was killed in the
 *   middle of it: no process sleeping the scenario's run tag, no run directory or cgroup its state
 *   recorded.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import * as z from 'zod';
import { DLQ_ATTRIBUTES } from '../../contract/messages';
import { JsonlEventLog, type LoggedEvent } from '../../src/adapters/events';
import type { JobEnvelope } from '../../src/core/envelope';
import type { JobRecord, WorkspaceRecord } from '../../src/core/ports';
import type { LocalClients } from '../../tools/local/emulators';
import type { PlatformInfo } from '../../tools/local/platform';
import { TEST_RUNS_DIR } from '../../tools/local/state-dir';
import { drain } from '../support/drive-queue';
import type { FakeGitHub } from '../support/fake-github';
import { processesSleeping } from '../support/processes';
import { REPO_OWNER } from './git-proxy';
import { RUN_WITNESS, type PlannedItem, type PlannedWorkspace, type Scenario } from './scenario';

const run = promisify(execFile);

export const INVARIANTS = [
  'terminal',
  'fence',
  'commits',
  'tree',
  'test-runs',
  'pull-requests',
  'dlq',
  'events',
  'fsck',
  'leftovers',
] as const;
/** Checked as the run goes rather than from what it left: `quiet` (./run.ts), `state` (./state-faults.ts). */
export const RUN_INVARIANTS = ['quiet', 'state'] as const;
export type Invariant = (typeof INVARIANTS)[number] | (typeof RUN_INVARIANTS)[number];
export type Violations = Partial<Record<Invariant, string[]>>;

export interface DlqCopy {
  readonly queue: string;
  readonly jobId?: string;
  readonly reason?: string;
}

/** A workspace branch as the git CLI reads it: commits after the base (oldest first), tree and head. */
export interface Branch {
  readonly commits: { readonly sha: string; readonly parents: string[]; readonly trailers: string[] }[];
  readonly tree: string;
  readonly head: string;
}

export interface Observed {
  readonly ledger: { readonly jobs: JobRecord[]; readonly workspaces: WorkspaceRecord[] };
  readonly events: LoggedEvent[];
  readonly dlq: DlqCopy[];
  /** Test runs as the test commands printed them (one line per run, in its kept output): job id and the commit checked out. */
  readonly runs: { readonly jobId: string; readonly sha: string }[];
  /** What test runs left on the machine: processes, run directories, cgroups. */
  readonly leftovers: string[];
  readonly branches: Map<string, Branch>;
  /** Pull requests of each workspace branch, by workspace. */
  readonly pulls: Map<string, number[]>;
  /** `git fsck --strict` complaints per repository. */
  readonly fsck: Map<string, string>;
  /** When the platform last started: DLQ messages from before died with the in-memory queues. */
  readonly lastStart: string;
}

const statusSchema = z.enum([
  'QUEUED',
  'IN_FLIGHT',
  'RUNNING',
  'SUCCEEDED',
  'FAILED',
  'FORWARDED',
  'SKIPPED',
  'CANCELLED',
]);
/** The fields the checks read, validated: a record that does not have them is reported, not trusted. */
const jobSchema = z.looseObject({
  jobId: z.string(),
  status: statusSchema,
  attempt: z.number(),
  updatedAt: z.string(),
  error: z.object({ reason: z.string(), message: z.string() }).optional(),
  blockedBy: z.string().optional(),
  pin: z.object({ sha: z.string(), repoUrl: z.string(), branch: z.string() }).optional(),
  result: z.record(z.string(), z.unknown()).optional(),
});
const workspaceSchema = z.looseObject({
  workspaceId: z.string(),
  state: z.enum(['ACTIVE', 'BLOCKED']).optional(),
  blockedBy: z.string().optional(),
  head: z.string().optional(),
});

/** Every record of the ledger table (a scan), split into jobs and workspaces. */
export async function readLedger(clients: LocalClients, tableName: string): Promise<Observed['ledger']> {
  const jobs: JobRecord[] = [];
  const workspaces: WorkspaceRecord[] = [];
  let startKey: Record<string, unknown> | undefined;
  do {
    const out = await clients.dynamodb.send(
      new ScanCommand({ TableName: tableName, ConsistentRead: true, ExclusiveStartKey: startKey }),
    );
    for (const item of out.Items ?? []) {
      const pk = String(item['pk']);
      if (pk.startsWith('job#')) jobs.push(jobSchema.parse(item) as unknown as JobRecord);
      else if (pk.startsWith('ws#')) workspaces.push(workspaceSchema.parse(item) as unknown as WorkspaceRecord);
    }
    startKey = out.LastEvaluatedKey;
  } while (startKey);
  return { jobs, workspaces };
}

export interface Sources {
  readonly clients: LocalClients;
  readonly info: PlatformInfo;
  readonly github: FakeGitHub;
}

/** Reads everything the checks need, from the outside. */
export async function collect(scenario: Scenario, { clients, info, github }: Sources): Promise<Observed> {
  const ledger = await readLedger(clients, info.tableName);
  const { events } = await new JsonlEventLog(info.eventLog).readFrom(0);
  const dlq: DlqCopy[] = [];
  for (const [queue, url] of Object.entries(info.dlqUrls)) {
    for (const message of await drain(clients.sqs, url)) {
      const attributes = message.MessageAttributes ?? {};
      dlq.push({
        queue,
        jobId: attributes['jobId']?.StringValue,
        reason: attributes[DLQ_ATTRIBUTES.reason]?.StringValue,
      });
    }
  }
  const runs = await printedRuns(path.join(info.stateDir, TEST_RUNS_DIR, 'runs'));
  const leftovers = await runLeftovers(scenario.runTag, path.join(info.stateDir, TEST_RUNS_DIR, 'runs'));
  const reposDir = path.join(info.stateDir, 'repos');
  const branches = new Map<string, Branch>();
  const pulls = new Map<string, number[]>();
  for (const ws of scenario.workspaces) {
    const gitDir = path.join(reposDir, `${ws.repo}.git`);
    const log = await git(
      gitDir,
      'log',
      '--first-parent',
      '--reverse',
      '--format=%H%x09%P%x09%(trailers:key=Agent-Job-Id,valueonly,separator=%x2C)',
      `${ws.baseSha}..${ws.branch}`,
    );
    const commits = log
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [sha = '', parents = '', trailers = ''] = line.split('\t');
        return { sha, parents: parents.split(' ').filter(Boolean), trailers: trailers.split(',').filter(Boolean) };
      });
    branches.set(ws.workspaceId, {
      commits,
      tree: await git(gitDir, 'rev-parse', `${ws.branch}^{tree}`),
      head: await git(gitDir, 'rev-parse', ws.branch),
    });
    pulls.set(
      ws.workspaceId,
      github
        .pulls(REPO_OWNER, ws.repo)
        .filter((p) => p.head === ws.branch)
        .map((p) => p.number),
    );
  }
  const fsck = new Map<string, string>();
  for (const repo of scenario.repos) {
    const result = await run('git', [
      '--git-dir',
      path.join(reposDir, `${repo}.git`),
      'fsck',
      '--strict',
      '--no-dangling',
      '--no-progress',
    ]).then(
      (r) => r.stderr.trim() + r.stdout.trim(),
      (error: { stderr?: string; message: string }) => error.stderr?.trim() || error.message,
    );
    if (result) fsck.set(repo, result);
  }
  return { ledger, events, dlq, runs, leftovers, branches, pulls, fsck, lastStart: info.startedAt };
}

/** The witness lines of every run's kept output (`runs/<jobId>.<run>.<key>.log` of the runner's state). */
async function printedRuns(runsDir: string): Promise<Observed['runs']> {
  const logs = (await readdir(runsDir).catch(() => [])).filter((name) => name.endsWith('.log'));
  const lines = await Promise.all(
    logs.map(async (name) => (await readFile(path.join(runsDir, name), 'utf8')).split('\n')),
  );
  return lines.flat().flatMap((line) => {
    const [word, jobId = '', sha = ''] = line.split(' ');
    return word === RUN_WITNESS ? [{ jobId, sha }] : [];
  });
}

/** Processes sleeping the run tag, and run directories and cgroups the runs' state recorded that are still there. */
export async function runLeftovers(runTag: string, runsDir: string): Promise<string[]> {
  const states = (await readdir(runsDir).catch(() => [])).filter((name) => name.endsWith('.json'));
  const recorded = await Promise.all(
    states.map(async (name) => {
      const state = JSON.parse(await readFile(path.join(runsDir, name), 'utf8')) as {
        runDir?: string;
        cgroup?: Record<string, unknown>;
      };
      const places = [state.runDir, ...Object.values(state.cgroup ?? {})].filter(
        (p): p is string => typeof p === 'string',
      );
      return places.filter((place) => existsSync(place)).map((place) => `${name}: ${place} is still there`);
    }),
  );
  return [
    ...processesSleeping(runTag).map((pid) => `process ${pid} (sleep ${runTag}) is still running`),
    ...recorded.flat(),
  ];
}

async function git(gitDir: string, ...args: string[]): Promise<string> {
  return (await run('git', ['--git-dir', gitDir, ...args], { maxBuffer: 256 * 1024 * 1024 })).stdout.trim();
}

export async function checkInvariants(scenario: Scenario, observed: Observed): Promise<Violations> {
  const violations: Violations = {};
  const fail = (invariant: Invariant, message: string) => (violations[invariant] ??= []).push(message);
  const jobs = new Map(observed.ledger.jobs.map((j) => [j.jobId, j]));
  const workspaces = new Map(observed.ledger.workspaces.map((w) => [w.workspaceId, w]));
  const runsOf = groupBy(observed.runs, (r) => r.jobId);
  const dlqOf = groupBy(observed.dlq, (c) => c.jobId ?? '');

  for (const ws of scenario.workspaces) {
    const own = ws.items.filter((i) => i.kind !== 'poison' && i.kind !== 'conflict');
    const record = (item: PlannedItem) => jobs.get(item.jobId);
    checkTerminal(own, record, fail);
    checkFence(ws, own, record, workspaces.get(ws.workspaceId), fail);
    const applied = appliedPatches(own, record, observed.branches.get(ws.workspaceId));
    const heads = checkCommits(
      ws,
      applied,
      record,
      observed.branches.get(ws.workspaceId),
      workspaces.get(ws.workspaceId),
      fail,
    );
    await checkTree(ws, applied, observed.branches.get(ws.workspaceId)?.tree, fail);
    checkStages(ws, own, record, heads, runsOf, observed.pulls.get(ws.workspaceId) ?? [], fail);
    checkDlq(ws, record, dlqOf, observed.lastStart, fail);
  }
  checkEvents(scenario, jobs, observed.events, fail);
  for (const [repo, complaint] of observed.fsck) fail('fsck', `${repo}: ${complaint.slice(0, 500)}`);
  for (const leftover of observed.leftovers) fail('leftovers', leftover);
  return violations;
}

type Fail = (invariant: Invariant, message: string) => void;
type RecordOf = (item: PlannedItem) => JobRecord | undefined;

/**
 * Failure reasons that leave a job's effect unknown: the job gave up, and "may have stopped
 * half-way" (README, failure reasons), e.g. pushed, then lost its lease and ran out of receives.
 */
const GAVE_UP = ['RETRIES_EXHAUSTED', 'UNEXPECTED_ERROR'];

/** Whether a job gave up (GAVE_UP) and its commit is on its workspace's branch: applied, with no verdict that says so. */
function gaveUpAfterPush(jobId: string, job: JobRecord | undefined, onBranch: ReadonlySet<string>): boolean {
  return job?.status === 'FAILED' && GAVE_UP.includes(job.error?.reason ?? '') && onBranch.has(jobId);
}

/** The jobs that gave up after their push took effect, over every branch: counted in the summary, so none passes unseen. */
export function gaveUpAfterPushIds(observed: Pick<Observed, 'ledger' | 'branches'>): string[] {
  const onBranch = new Set([...observed.branches.values()].flatMap((b) => b.commits.flatMap((c) => c.trailers)));
  return observed.ledger.jobs.filter((job) => gaveUpAfterPush(job.jobId, job, onBranch)).map((job) => job.jobId);
}

/**
 * The patches a workspace's branch must hold, in send order: every patch job that SUCCEEDED, and
 * one that gave up whose commit is on the branch.
 */
export function appliedPatches(
  items: readonly PlannedItem[],
  record: RecordOf,
  branch: Branch | undefined,
): PlannedItem[] {
  const onBranch = new Set(branch?.commits.flatMap((c) => c.trailers) ?? []);
  return items.filter((i) => {
    if (i.kind !== 'apply_patch' && i.kind !== 'hostile_patch') return false;
    const job = record(i);
    return job?.status === 'SUCCEEDED' || gaveUpAfterPush(i.jobId, job, onBranch);
  });
}

function checkTerminal(items: readonly PlannedItem[], record: RecordOf, fail: Fail): void {
  for (const item of items) {
    const job = record(item);
    if (!job) fail('terminal', `${item.jobId} (${item.kind}) is not in the ledger`);
    else if (job.status === 'FAILED' && !job.error?.reason)
      fail('terminal', `${item.jobId} is FAILED without a reason`);
    else if (job.status === 'SKIPPED' && !job.blockedBy) fail('terminal', `${item.jobId} is SKIPPED without its cause`);
    else if (
      job.status === 'QUEUED' ||
      job.status === 'IN_FLIGHT' ||
      job.status === 'RUNNING' ||
      job.status === 'FORWARDED'
    )
      fail('terminal', `${item.jobId} (${item.kind}) ended ${job.status} (attempt ${job.attempt})`);
    else if (item.cancelled && job.status !== 'CANCELLED')
      fail('terminal', `${item.jobId} was cancelled before it was sent but is ${job.status}`);
    else if (item.kind === 'hostile_patch' && job.status === 'SUCCEEDED')
      fail('terminal', `${item.jobId}, a hostile patch, SUCCEEDED`);
  }
}

/** The fence: the workspace is BLOCKED by its first job that failed at the sequencer (no pin), and jobs are SKIPPED exactly after it. */
function checkFence(
  ws: PlannedWorkspace,
  items: readonly PlannedItem[],
  record: RecordOf,
  wsRecord: WorkspaceRecord | undefined,
  fail: Fail,
): void {
  const fencing = items.find((i) => record(i)?.status === 'FAILED' && record(i)?.pin === undefined);
  if (!fencing) {
    if (wsRecord?.state === 'BLOCKED')
      fail('fence', `${ws.workspaceId} is BLOCKED by ${wsRecord.blockedBy} though no job failed at the sequencer`);
    for (const item of items)
      if (record(item)?.status === 'SKIPPED')
        fail('fence', `${item.jobId} was SKIPPED in ${ws.workspaceId}, which never failed`);
    return;
  }
  if (wsRecord?.state !== 'BLOCKED' || wsRecord.blockedBy !== fencing.jobId) {
    fail(
      'fence',
      `${ws.workspaceId}: ${fencing.jobId} failed (${record(fencing)?.error?.reason}) but the workspace is ${wsRecord?.state} blocked by ${wsRecord?.blockedBy}`,
    );
  }
  for (const item of items) {
    const status = record(item)?.status;
    if (item.position < fencing.position && status === 'SKIPPED')
      fail('fence', `${item.jobId} was SKIPPED before the fence at ${fencing.jobId}`);
    if (item.position > fencing.position && status !== 'SKIPPED' && status !== 'CANCELLED')
      fail('fence', `${item.jobId} is ${status} after the fence at ${fencing.jobId}`);
    if (status === 'SKIPPED' && record(item)?.blockedBy !== fencing.jobId)
      fail('fence', `${item.jobId} is SKIPPED blocked by ${record(item)?.blockedBy}, not ${fencing.jobId}`);
  }
}

/**
 * One commit per applied patch, in send order, each carrying its job's trailer and on top of the
 * previous one. Returns the head after each applied job (by job id), for the pins.
 */
function checkCommits(
  ws: PlannedWorkspace,
  applied: readonly PlannedItem[],
  record: RecordOf,
  branch: Branch | undefined,
  wsRecord: WorkspaceRecord | undefined,
  fail: Fail,
): Map<string, string> {
  const heads = new Map<string, string>();
  if (!branch) {
    fail('commits', `${ws.workspaceId}: branch ${ws.branch} not found`);
    return heads;
  }
  const trailers = branch.commits.map((c) => c.trailers.join('+'));
  const expected = applied.map((i) => i.jobId);
  if (JSON.stringify(trailers) !== JSON.stringify(expected)) {
    fail(
      'commits',
      `${ws.workspaceId}: commits carry ${JSON.stringify(trailers)}, applied patches in send order are ${JSON.stringify(expected)}`,
    );
  }
  let parent = ws.baseSha;
  for (const [index, commit] of branch.commits.entries()) {
    if (commit.parents.length !== 1 || commit.parents[0] !== parent)
      fail(
        'commits',
        `${ws.workspaceId}: commit ${commit.sha} has parents ${commit.parents.join(',')}, expected ${parent}`,
      );
    parent = commit.sha;
    const item = applied[index];
    if (!item) continue;
    heads.set(item.jobId, commit.sha);
    if (record(item)?.status !== 'SUCCEEDED') continue; // gave up: the ledger names no commit
    const result = record(item)?.result;
    if (result?.['commitSha'] !== commit.sha)
      fail(
        'commits',
        `${item.jobId}: the ledger names commit ${String(result?.['commitSha'])}, the branch has ${commit.sha}`,
      );
  }
  // The ledger's head is the commit of the last patch it recorded SUCCEEDED.
  const recorded = applied.filter((i) => record(i)?.status === 'SUCCEEDED').at(-1);
  const recordedHead = recorded ? heads.get(recorded.jobId) : ws.baseSha;
  if ((wsRecord?.head ?? ws.baseSha) !== recordedHead && applied.length > 0)
    fail(
      'commits',
      `${ws.workspaceId}: the ledger's head ${wsRecord?.head} is not the branch's commit of its last applied patch ${recordedHead}`,
    );
  return heads;
}

/** The branch tree must be what the git CLI builds by applying the same patches, in order, to the base. */
async function checkTree(
  ws: PlannedWorkspace,
  applied: readonly PlannedItem[],
  tree: string | undefined,
  fail: Fail,
): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-chaos-tree-'));
  const env = { ...process.env, GIT_DIR: ws.scratchGitDir, GIT_INDEX_FILE: path.join(dir, 'index') };
  const inIndex = async (...args: string[]) =>
    (await run('git', args, { env, cwd: dir, maxBuffer: 64 * 1024 * 1024 })).stdout.trim();
  try {
    await inIndex('read-tree', ws.baseSha);
    for (const item of applied) {
      await writeFile(
        path.join(dir, 'patch.diff'),
        (item.job as Extract<JobEnvelope, { type: 'apply_patch' }>).payload.diff ?? '',
      );
      await inIndex('apply', '--cached', path.join(dir, 'patch.diff'));
    }
    const expected = await inIndex('write-tree');
    if (expected !== tree)
      fail(
        'tree',
        `${ws.workspaceId}: the branch tree is ${tree}, git apply of its ${applied.length} applied patches gives ${expected}`,
      );
  } catch (error) {
    fail(
      'tree',
      `${ws.workspaceId}: git apply of the applied patches failed: ${(error as Error).message.slice(0, 300)}`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Test runs and pull requests: pinned to the head at their turn; one run per job; one PR per branch. */
function checkStages(
  ws: PlannedWorkspace,
  items: readonly PlannedItem[],
  record: RecordOf,
  heads: Map<string, string>,
  runsOf: Map<string, { jobId: string; sha: string }[]>,
  pulls: readonly number[],
  fail: Fail,
): void {
  let head = ws.baseSha;
  if (pulls.length > 1)
    fail('pull-requests', `${ws.workspaceId}: ${pulls.length} pull requests for ${ws.branch}: ${pulls.join(', ')}`);
  for (const item of items) {
    head = heads.get(item.jobId) ?? head;
    const job = record(item);
    if (item.kind === 'run_tests') {
      const runs = runsOf.get(item.jobId) ?? [];
      if (runs.length > 1) fail('test-runs', `${item.jobId} ran ${runs.length} times`);
      if (job?.pin && job.pin.sha !== head)
        fail('test-runs', `${item.jobId} was pinned to ${job.pin.sha}, the head at its turn was ${head}`);
      for (const r of runs)
        if (r.sha !== job?.pin?.sha) fail('test-runs', `${item.jobId} ran at ${r.sha}, pinned to ${job?.pin?.sha}`);
      if (job?.status === 'SUCCEEDED') {
        if (runs.length !== 1) fail('test-runs', `${item.jobId} SUCCEEDED with ${runs.length} runs`);
        const verdict = item.testsFail ? 'failed' : 'passed';
        if (job.result?.['verdict'] !== verdict)
          fail('test-runs', `${item.jobId}: verdict ${String(job.result?.['verdict'])}, the command gives ${verdict}`);
      } else if (runs.length > 0 && job?.error?.reason !== 'TEST_RUN_ERROR') {
        fail('test-runs', `${item.jobId} ran but is ${job?.status} ${job?.error?.reason ?? ''}`);
      }
    }
    if (item.kind === 'open_pr' && job?.status === 'SUCCEEDED') {
      if (job.pin?.sha !== head)
        fail('pull-requests', `${item.jobId} was pinned to ${job.pin?.sha}, the head at its turn was ${head}`);
      if (!pulls.includes(Number(job.result?.['number'])))
        fail(
          'pull-requests',
          `${item.jobId} names pull request ${String(job.result?.['number'])}, the branch has ${pulls.join(', ') || 'none'}`,
        );
    }
  }
}

/**
 * The local platform's queues live in memory; at start it puts back the DLQ copy of every FAILED
 * or SKIPPED job from its saved copies (tools/local/dlq-copies.ts), but a kill between the ledger's
 * verdict and the DLQ send leaves none to put back. A re-send does not always bring a copy back: the
 * CLI's door does not send a finished job again, and a job that failed at its stage is the stage's
 * (the sequencer acknowledges it, as on AWS). So a copy with its reason is required for every job
 * that failed in the last life, and for none that succeeded.
 */
function checkDlq(
  ws: PlannedWorkspace,
  record: RecordOf,
  dlqOf: Map<string, DlqCopy[]>,
  lastStart: string,
  fail: Fail,
): void {
  for (const item of ws.items) {
    const copies = dlqOf.get(item.jobId) ?? [];
    const withReason = (reason: string) => copies.some((c) => c.reason === reason);
    if (item.kind === 'poison') {
      if (!copies.some((c) => c.queue === 'agent-jobs' && c.reason === 'INVALID_JOB'))
        fail('dlq', `poison ${item.jobId} is not on the agent-jobs DLQ as INVALID_JOB (${JSON.stringify(copies)})`);
      continue;
    }
    if (item.kind === 'conflict') {
      if (!withReason('CONFLICT'))
        fail('dlq', `the reuse of ${item.jobId} at position ${item.position} is not on a DLQ as CONFLICT`);
      continue;
    }
    const job = record(item);
    const lostWithTheQueues = job !== undefined && job.updatedAt < lastStart;
    if ((job?.status === 'FAILED' || job?.status === 'SKIPPED') && !lostWithTheQueues) {
      const queue = job.pin ? (item.kind === 'run_tests' ? 'run-tests' : 'open-pr') : 'agent-jobs';
      if (!copies.some((c) => c.queue === queue && c.reason === job.error?.reason)) {
        fail(
          'dlq',
          `${item.jobId} is ${job.status} ${job.error?.reason} but not on the ${queue} DLQ with that reason (${JSON.stringify(copies)})`,
        );
      }
    }
    if (job?.status === 'SUCCEEDED' || job?.status === 'CANCELLED') {
      const wrong = copies.filter((c) => c.reason !== undefined && c.reason !== 'CONFLICT');
      if (wrong.length > 0) fail('dlq', `${item.jobId} is ${job.status} but on a DLQ: ${JSON.stringify(wrong)}`);
    }
  }
}

const OUTCOME_EVENT: Partial<Record<JobRecord['status'], LoggedEvent['type']>> = {
  SUCCEEDED: 'AgentJobSucceeded',
  FAILED: 'AgentJobFailed',
  SKIPPED: 'AgentJobSkipped',
};

/** Every outcome announced; no announcement contradicting the ledger (a CONFLICT is about the reuse, not the job). */
function checkEvents(
  scenario: Scenario,
  jobs: Map<string, JobRecord>,
  events: readonly LoggedEvent[],
  fail: Fail,
): void {
  const announced = groupBy(
    events.filter((e) => e.type !== 'WorkspaceBlocked' && e.detail['reason'] !== 'CONFLICT'),
    (e) => String(e.detail['jobId']),
  );
  for (const item of scenario.items) {
    if (item.kind === 'poison' || item.kind === 'conflict') continue;
    const job = jobs.get(item.jobId);
    if (!job) continue;
    const types = new Set((announced.get(item.jobId) ?? []).map((e) => e.type));
    const expected = OUTCOME_EVENT[job.status];
    if (expected && !types.has(expected))
      fail('events', `${item.jobId} is ${job.status} but ${expected} was never published`);
    const contradicting = [...types].filter((t) => t !== expected);
    if (contradicting.length > 0)
      fail('events', `${item.jobId} is ${job.status} but ${contradicting.join(', ')} was published`);
  }
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
}
