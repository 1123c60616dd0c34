/**
 * The live view shows state from the ledger, and a cancel sent before a job's turn wins. Every
 * command runs as a user runs it, the CLI in a child process. The platform runs in this process,
 * for two things a user cannot do from outside: read the live view it writes (the `local up`
 * terminal), and hold one patch at the git remote (fault injection at the WorkspaceGit port) so
 * that a later job of the workspace is certainly still waiting for its turn when it is cancelled.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import { localGit } from '../../src/compose/local';
import { startPlatform, type LocalPlatform } from '../../tools/local/platform';
import { eventually } from '../support/eventually';
import { repositoryDir } from '../../tools/local/state-dir';
import {
  applyPatchArgs,
  commitSubjects,
  diffChain,
  makeRepository,
  removeScratch,
  runCli,
  type CliResult,
} from './harness';

jest.setTimeout(240_000);

const HELD_JOB = 'hold-1';

interface JobJson {
  jobId: string;
  status: string;
  attempt: number;
}

let platform: LocalPlatform;
let stateDir: string;
let printed = '';
let releaseHeld: () => void = () => undefined;
const held = new Promise<void>((resolve) => (releaseHeld = resolve));

async function cli(args: readonly string[]): Promise<CliResult> {
  return runCli([...args, '--state-dir', stateDir]);
}

async function cliJson<T>(args: readonly string[]): Promise<T> {
  const result = await cli([...args, '--json']);
  if (result.code !== 0) throw new Error(`agent-jobs ${args.join(' ')} exited ${result.code}: ${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

async function untilJob(jobId: string, done: (job: JobJson) => boolean): Promise<JobJson> {
  return eventually(() => cliJson<JobJson>(['status', jobId]), done, {
    what: `job ${jobId}`,
    timeoutMs: 150_000,
    intervalMs: 500,
  });
}

/** The live view's lines since it started, once `done` holds for them. */
async function untilViewShows(what: string, done: (lines: string[]) => boolean): Promise<string[]> {
  return eventually(() => printed.split('\n'), done, {
    what: `the live view to show ${what}`,
    timeoutMs: 30_000,
    intervalMs: 200,
  });
}

/** The last `workspaces:` line the view printed. */
const lastState = (lines: readonly string[]) => [...lines].reverse().find((l) => l.startsWith('workspaces: ')) ?? '';

beforeAll(async () => {
  stateDir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-view-'));
  const output = new PassThrough();
  output.on('data', (chunk: Buffer) => (printed += chunk.toString()));
  platform = await startPlatform({
    stateDir,
    persist: false,
    output,
    decorateParts: (parts) => {
      const git = parts.git ?? localGit(parts.workRoot);
      return {
        ...parts,
        git: {
          branchHead: (url, branch) => git.branchHead(url, branch),
          async commitPatch(request) {
            if (request.jobId === HELD_JOB) await held;
            return git.commitPatch(request);
          },
        },
      };
    },
  });
});

afterAll(async () => {
  releaseHeld();
  await platform?.stop();
  await rm(stateDir, { recursive: true, force: true });
  await removeScratch();
});

test('a cancel sent while the job waits for its turn wins; the live view shows jobs and workspaces as they are now', async () => {
  const source = await makeRepository({ 'app.txt': 'one\n' }, ['live']);
  const repoUrl = (await cliJson<{ url: string }>(['repo', 'import', source, '--name', 'live'])).url;
  const [first, second, third] = await diffChain(source, [{ 'a.txt': 'a\n' }, { 'b.txt': 'b\n' }, { 'c.txt': 'c\n' }]);

  // hold-1 is held at the remote: queued-2, behind it in the workspace's FIFO group, waits.
  await cliJson(applyPatchArgs('ws-live', HELD_JOB, repoUrl, 'live', first ?? '', 'Held'));
  await cliJson(applyPatchArgs('ws-live', 'queued-2', repoUrl, 'live', second ?? '', 'Cancelled'));
  await untilJob(HELD_JOB, (j) => j.status === 'IN_FLIGHT');
  const cancelled = await cli(['cancel', 'queued-2']);
  expect(cancelled.code).toBe(0);
  expect(cancelled.stdout).toMatch(
    /queued-2: QUEUED -> CANCELLED \(acknowledged without running when its turn comes\)/,
  );
  releaseHeld();

  await cliJson(applyPatchArgs('ws-live', 'after-3', repoUrl, 'live', third ?? '', 'After'));
  expect((await cli(['wait', HELD_JOB, 'after-3', '--timeout', '150'])).code).toBe(0);
  expect(await cliJson<JobJson>(['status', 'queued-2'])).toMatchObject({ status: 'CANCELLED', attempt: 0 });
  // after-3 applies on top of queued-2's change in its diff chain only if queued-2 never ran:
  // the branch has exactly the held patch and the one after the cancelled one.
  expect(await commitSubjects(repositoryDir(stateDir, 'live'), 'live')).toEqual(['After', 'Held', 'initial']);

  // A failing test run shows its verdict, not a plain SUCCEEDED.
  await cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-live',
    '--job-id',
    'tests-red',
    '--command',
    'false',
  ]);
  expect((await cli(['wait', 'tests-red', '--timeout', '150'])).code).toBe(1);
  let lines = await untilViewShows('the red test run', (l) =>
    l.some((x) => /ws-live {2}run_tests {2}tests-red {2}tests failed {2}tests failed \(exit 1\)/.test(x)),
  );
  expect(lines.some((l) => /ws-live {2}apply_patch {2}queued-2 {2}CANCELLED/.test(l))).toBe(true);

  // A poison patch blocks the workspace; the job behind it is skipped; --drop cancels it.
  const dir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-poison-'));
  const poison = path.join(dir, 'poison.diff');
  await writeFile(
    poison,
    [
      'diff --git a/app.txt b/app.txt',
      '--- a/app.txt',
      '+++ b/app.txt',
      '@@ -1 +1 @@',
      '-not the content',
      '+two',
      '',
    ].join('\n'),
  );
  await cliJson(applyPatchArgs('ws-live', 'poison', repoUrl, 'live', poison, 'Poison'));
  await cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-live',
    '--job-id',
    'skipped-1',
    '--command',
    'true',
  ]);
  await cli(['wait', 'poison', 'skipped-1', '--timeout', '150']);
  lines = await untilViewShows('the workspace blocked', (l) =>
    /ws-live BLOCKED by poison \(PATCH_DOES_NOT_APPLY\).*SKIPPED 1/.test(lastState(l)),
  );
  expect(lines).toContainEqual(expect.stringMatching(/ws-live {2}BLOCKED by poison \(PATCH_DOES_NOT_APPLY\)$/));

  await cliJson(['workspace', 'unblock', 'ws-live', '--drop']);
  lines = await untilViewShows(
    'the unblock and the drop',
    (l) => /ws-live ACTIVE/.test(lastState(l)) && !/SKIPPED/.test(lastState(l)),
  );
  expect(lines).toContainEqual(expect.stringMatching(/ws-live {2}ACTIVE \(unblocked\)$/));
  expect(lines).toContainEqual(expect.stringMatching(/ws-live {2}run_tests {2}skipped-1 {2}CANCELLED/));

  // A redriven job that fails again is one FAILED job, not two.
  await cliJson(['dlq', 'redrive', 'poison']);
  await untilJob('poison', (j) => j.attempt >= 2 && j.status === 'FAILED');
  lines = await untilViewShows('the redriven job failed again', (l) => /ws-live BLOCKED by poison/.test(lastState(l)));
  expect(lastState(lines)).toMatch(/^workspaces: ws-live BLOCKED by poison \(PATCH_DOES_NOT_APPLY\) at [0-9a-f]{12}: /);
  expect(lastState(lines)).toMatch(/FAILED 1(,|$)/);
  expect(lastState(lines)).toMatch(/SUCCEEDED 2/);
  expect(lastState(lines)).toMatch(/tests failed 1/);

  // `workspaces`: the same state, as a command; --json never shows the ledger's working fields.
  const listed = await cli(['workspaces', '--json']);
  expect(listed.code).toBe(0);
  const [ws] = listed.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(ws).toMatchObject({
    workspaceId: 'ws-live',
    state: 'BLOCKED',
    blockedBy: 'poison',
    jobs: { SUCCEEDED: 2, 'tests failed': 1, FAILED: 1 },
  });
  expect(listed.stdout).not.toMatch(/leaseOwner|digest|"ttl"|listKey|listSort/);
  expect((await cli(['workspaces'])).stdout).toMatch(
    /ws-live +BLOCKED by poison \(PATCH_DOES_NOT_APPLY\) +[0-9a-f]{12} +SUCCEEDED 2, .*tests failed 1, .*FAILED 1/,
  );
  await rm(dir, { recursive: true, force: true });
});
