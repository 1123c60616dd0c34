/**
 * What the CLI tells an operator, checked as a user runs it: a reused job id is visible where
 * the user looks, unknown ids are errors, and exit codes say what happened.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  ChangeMessageVisibilityCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { deduplicationId, messageGroupId } from '../../src/core/envelope';
import { COMMANDS } from '../../tools/cli/commands';
import {
  applyPatchArgs,
  BIN,
  diffChain,
  internalKeysIn,
  makeRepository,
  publicJsonLines,
  removeScratch,
  runCli,
  startPlatform,
  type RunningPlatform,
} from './harness';

jest.setTimeout(180_000);

interface JobJson {
  jobId: string;
  status: string;
  attempt: number;
  conflicts?: { refusedBy: string; dlq?: string; workspaceId: string }[];
  succeeded?: boolean;
}

/** Exit codes documented in the README. */
const EXIT = { failed: 1, usage: 2, notFound: 3, timedOut: 4, unavailable: 5 };

interface PlatformInfo {
  endpoints: { sqs: string };
  queueUrls: Record<string, string>;
  dlqUrls: Record<string, string>;
}

/** An SQS client on the platform's emulator, for what a user's CLI cannot do: send raw messages, look at receive counts. */
async function platformSqs(): Promise<{ sqs: SQSClient; info: PlatformInfo }> {
  const info = JSON.parse(await readFile(path.join(platform.stateDir, 'platform.json'), 'utf8')) as PlatformInfo;
  const sqs = new SQSClient({
    region: 'us-east-1',
    endpoint: info.endpoints.sqs,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  return { sqs, info };
}

let platform: RunningPlatform;
let source: string;
let repoUrl: string;

beforeAll(async () => {
  platform = await startPlatform();
  source = await makeRepository({ 'app.txt': 'one\n' }, ['conflict', 'raw', 'later', 'dlq']);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'operator'])).url;
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

test('a job id reused for a different patch is refused at enqueue, shown by status, and fails wait', async () => {
  const [original, other] = await diffChain(source, [{ 'a.txt': 'a\n' }, { 'a.txt': 'a\nb\n' }]);
  await platform.cliJson(applyPatchArgs('ws-conflict', 'p1', repoUrl, 'conflict', original ?? '', 'Original'));
  expect((await platform.cliJson<JobJson>(['wait', 'p1', '--timeout', '120'])).succeeded).toBe(true);

  const reused = await platform.cli(applyPatchArgs('ws-conflict', 'p1', repoUrl, 'conflict', other ?? '', 'Different'));

  expect(reused.code).toBe(EXIT.failed);
  expect(reused.stderr).toMatch(/CONFLICT: job id p1 is taken by a different request/);
  const status = await platform.cliJson<JobJson>(['status', 'p1']);
  expect(status).toMatchObject({
    status: 'SUCCEEDED',
    conflicts: [{ refusedBy: 'enqueue', workspaceId: 'ws-conflict' }],
  });
  expect((await platform.cli(['status', 'p1'])).stdout).toMatch(/CONFLICT: 1 other request reused this job id/);
  const waited = await platform.cli(['wait', 'p1', '--timeout', '60']);
  expect(waited.code).toBe(EXIT.failed);
  expect(waited.stdout).toMatch(/CONFLICT/);
});

test('a conflicting message sent without the CLI is refused by the sequencer and recorded beside the original', async () => {
  const [diff] = await diffChain(source, [{ 'raw.txt': 'raw\n' }]);
  await platform.cliJson(applyPatchArgs('ws-raw', 'raw-1', repoUrl, 'raw', diff ?? '', 'Original'));
  await platform.cliJson(['wait', 'raw-1', '--timeout', '120']);
  // What a producer without the ledger sends: the same job id, another request.
  const { sqs, info } = await platformSqs();
  const job = {
    jobId: 'raw-1',
    workspaceId: 'ws-raw',
    tenantId: 'default',
    type: 'run_tests',
    createdAt: new Date().toISOString(),
    payload: { command: 'true' },
  };
  await sqs.send(
    new SendMessageCommand({
      QueueUrl: info.queueUrls['agent-jobs'],
      MessageBody: JSON.stringify(job),
      MessageGroupId: messageGroupId('ws-raw'),
      MessageDeduplicationId: deduplicationId('raw-1', 'run_tests'),
      MessageAttributes: {
        jobId: { DataType: 'String', StringValue: 'raw-1' },
        type: { DataType: 'String', StringValue: 'run_tests' },
      },
    }),
  );
  sqs.destroy();

  const refused = await platform.untilJob<JobJson>('raw-1', (j) => (j.conflicts?.length ?? 0) > 0);

  expect(refused).toMatchObject({ status: 'SUCCEEDED', conflicts: [{ refusedBy: 'sequencer', dlq: 'agent-jobs' }] });
  expect((await platform.cli(['wait', 'raw-1', '--timeout', '60'])).code).toBe(EXIT.failed);
});

test('status counts the deliveries of a job that succeeded on its first as 1, for every job type', async () => {
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-conflict',
    '--job-id',
    'tests-once',
    '--command',
    'true',
  ]);
  // Its verdict first: an open_pr sent while its required tests run waits, and each wait is a delivery.
  await platform.cliLines(['wait', 'tests-once', '--timeout', '120']);
  await platform.cliJson([
    'enqueue',
    '--type',
    'open_pr',
    '--workspace',
    'ws-conflict',
    '--job-id',
    'pr-once',
    '--base',
    'main',
    '--title',
    'Once',
  ]);
  await platform.cliLines(['wait', 'tests-once', 'pr-once', '--timeout', '120']);
  const attempts = await Promise.all(
    ['p1', 'tests-once', 'pr-once'].map((id) => platform.cliJson<JobJson>(['status', id])),
  );
  expect(attempts.map((j) => [j.jobId, j.status, j.attempt])).toEqual([
    ['p1', 'SUCCEEDED', 1],
    ['tests-once', 'SUCCEEDED', 1],
    ['pr-once', 'SUCCEEDED', 1],
  ]);
  expect((await platform.cli(['status', 'pr-once'])).stdout).toMatch(/^attempt +1$/m);
});

test("logs shows the job's log lines and the whole output of its test run, beyond the verdict's tail; an unknown id exits 3", async () => {
  // About 29 KB of output: more than the tail a verdict keeps (8 KiB).
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-conflict',
    '--job-id',
    'tests-loud',
    '--command',
    'seq 1 6000',
  ]);
  await platform.cliJson(['wait', 'tests-loud', '--timeout', '120']);

  const shown = await platform.cli(['logs', 'tests-loud']);
  expect(shown.code).toBe(0);
  expect(shown.stdout).toMatch(/^tests-loud \(run_tests, tests passed\): from .*platform\.log$/m);
  const buildId = /buildId=(local:tests-loud:0:[0-9a-f]{16})/.exec(shown.stdout)?.[1];
  expect(shown.stdout).toMatch(/INFO +run_tests build started .*buildId=local:tests-loud:0:[0-9a-f]{16}/);
  expect(shown.stdout).toContain(`--- output of ${buildId} (run 0) ---\n1\n2\n3\n`);
  expect(shown.stdout).toContain(`\n5999\n6000\n--- end of ${buildId} ---`);

  const lines = await platform.cliLines<{ kind: string; function?: string; text?: string }>(['logs', 'tests-loud']);
  expect(new Set(lines.map((l) => l.kind))).toEqual(new Set(['log', 'output']));
  expect(lines.filter((l) => l.kind === 'log').map((l) => l.function)).toEqual(
    expect.arrayContaining(['sequencer', 'run_tests', 'build_events']),
  );
  expect(lines.find((l) => l.kind === 'output')?.text?.split('\n')).toHaveLength(6001);

  const unknown = await platform.cli(['logs', 'nosuch']);
  expect(unknown.code).toBe(EXIT.notFound);
  expect(unknown.stderr).toMatch(/job nosuch is not in the ledger/);
});

test('cancel and wait refuse ids the ledger does not know; a later enqueue of that id runs', async () => {
  const cancelled = await platform.cli(['cancel', 'nosuch']);
  expect(cancelled.code).toBe(EXIT.notFound);
  expect(cancelled.stderr).toMatch(/job nosuch is not in the ledger/);
  expect(cancelled.stdout).toBe('');

  // Without the fix this waits out its whole timeout and exits 1.
  const waited = await platform.cli(['wait', 'never-enqueued', '--timeout', '60']);
  expect(waited.code).toBe(EXIT.notFound);
  expect(waited.stderr).toMatch(/job never-enqueued not in the ledger/);

  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-conflict',
    '--job-id',
    'nosuch',
    '--command',
    'true',
  ]);
  expect((await platform.cliJson<JobJson>(['wait', 'nosuch', '--timeout', '120'])).succeeded).toBe(true);
  const again = await platform.cli(['cancel', 'nosuch']);
  expect(again.code).toBe(EXIT.failed);
  expect(again.stderr).toMatch(/job nosuch is SUCCEEDED already \(tests passed\)/);
});

test('wait exits with its own code when it times out, and usage errors exit 2 in one line', async () => {
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-conflict',
    '--job-id',
    'slow',
    '--command',
    'sleep 30',
  ]);
  const waited = await platform.cli(['wait', 'slow', '--timeout', '1']);
  expect(waited.code).toBe(EXIT.timedOut);
  expect(waited.stdout).toMatch(/timed out after 1s/);

  const usage = await platform.cli(['wait']);
  expect(usage.code).toBe(EXIT.usage);
  expect(usage.stderr.trim().split('\n')).toHaveLength(1);
});

test('dlq list shows every failed and skipped job of a workspace with two failures, without receiving; show and redrive reach a job by id', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-dlq-'));
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
  const [good1, good2] = await diffChain(source, [{ 'dlq-1.txt': '1\n' }, { 'dlq-2.txt': '2\n' }]);
  const send = async (jobId: string, diff: string) =>
    platform.cliJson(applyPatchArgs('ws-dlq', jobId, repoUrl, 'dlq', diff, jobId));
  await send('poison-1', poison);
  await send('skip-1', good1 ?? '');
  await platform.cli(['wait', 'poison-1', 'skip-1', '--timeout', '120']);
  await platform.cliJson(['workspace', 'unblock', 'ws-dlq', '--drop']);
  await send('poison-2', poison);
  await send('skip-2', good2 ?? '');
  await platform.cli(['wait', 'poison-2', 'skip-2', '--timeout', '120']);

  const { sqs, info } = await platformSqs();
  const dlqUrl = info.dlqUrls['agent-jobs'];
  /** The receive count of the workspace's group head on the FIFO DLQ, by receiving it here (and releasing it). */
  const headReceives = async () => {
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: dlqUrl,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: 30,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    for (const m of Messages)
      await sqs.send(
        new ChangeMessageVisibilityCommand({ QueueUrl: dlqUrl, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0 }),
      );
    const head = Messages.find((m) => m.MessageAttributes?.['workspaceId']?.StringValue === 'ws-dlq');
    return {
      jobId: head?.MessageAttributes?.['jobId']?.StringValue,
      receives: Number(head?.Attributes?.ApproximateReceiveCount),
    };
  };
  const before = await headReceives();

  const listed = (
    await platform.cliLines<{
      jobId: string;
      status: string;
      reason?: string;
      blockedBy?: string;
      workspaceId: string;
    }>(['dlq', 'list'])
  ).filter((r) => r.workspaceId === 'ws-dlq');
  expect(listed.map((r) => [r.jobId, r.status, r.reason ?? r.blockedBy])).toEqual([
    ['poison-1', 'FAILED', 'PATCH_DOES_NOT_APPLY'],
    ['poison-2', 'FAILED', 'PATCH_DOES_NOT_APPLY'],
    ['skip-2', 'SKIPPED', 'SKIPPED'],
  ]);
  expect((await platform.cli(['dlq', 'list'])).stdout).toMatch(
    /poison-2 +apply_patch +ws-dlq +FAILED +PATCH_DOES_NOT_APPLY/,
  );
  expect(await platform.cliJson(['dlq', 'show', 'poison-2'])).toMatchObject({
    jobId: 'poison-2',
    status: 'FAILED',
    dlq: [{ queue: 'agent-jobs', reason: 'PATCH_DOES_NOT_APPLY' }],
  });
  expect((await platform.cli(['dlq', 'show', 'poison-2'])).stdout).toMatch(
    /next: fix the cause, then "dlq redrive poison-2"/,
  );

  // Two lists and two shows received nothing: only this test's own receive counts.
  expect(await headReceives()).toEqual({ jobId: 'poison-1', receives: before.receives + 1 });
  sqs.destroy();

  // poison-2 sits behind poison-1 in the group: redrive reaches it by id and keeps poison-1 in place.
  await platform.cliJson(['workspace', 'unblock', 'ws-dlq', '--drop']);
  const redriven = await platform.cliJson<{ redriven: { jobId: string }[] }>(['dlq', 'redrive', 'poison-2']);
  expect(redriven.redriven.map((r) => r.jobId)).toEqual(['poison-2']);
  expect(await platform.untilJob<JobJson>('poison-2', (j) => j.attempt >= 2 && j.status !== 'IN_FLIGHT')).toMatchObject(
    { status: 'FAILED', attempt: 2 },
  );
  const after = (
    await platform.cliLines<{ jobId: string; attempt?: number; workspaceId: string }>(['dlq', 'list'])
  ).filter((r) => r.workspaceId === 'ws-dlq');
  expect(after.map((r) => [r.jobId, r.attempt])).toEqual([
    ['poison-1', 1],
    ['poison-2', 2],
  ]);
  await rm(dir, { recursive: true, force: true });
});

test('enqueue errors name the flags the user typed; a missing diff file is a usage error', async () => {
  const noBase = await platform.cli(['enqueue', '--type', 'open_pr', '--workspace', 'ws-conflict', '--title', 'T']);
  expect(noBase.code).toBe(EXIT.usage);
  expect(noBase.stderr).toMatch(/--base is required/);
  expect(noBase.stderr).not.toMatch(/payload\./);

  const dir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-empty-'));
  const empty = path.join(dir, 'empty.diff');
  await writeFile(empty, '');
  const emptyDiff = await platform.cli(applyPatchArgs('ws-conflict', 'empty-1', repoUrl, 'later', empty, 'Empty'));
  expect(emptyDiff.code).toBe(EXIT.usage);
  expect(emptyDiff.stderr).toMatch(new RegExp(`--diff-file ${empty}: the file is empty`));
  expect(emptyDiff.stderr).not.toMatch(/payload\.|diffRef/);

  const missing = await platform.cli(
    applyPatchArgs('ws-conflict', 'missing-1', repoUrl, 'later', path.join(dir, 'nope.diff'), 'Missing'),
  );
  expect(missing.code).toBe(EXIT.usage);
  expect(missing.stderr).toMatch(/cannot read --diff-file .*nope\.diff: no such file/);
  expect(missing.stderr.trim().split('\n')).toHaveLength(1);
  await rm(dir, { recursive: true, force: true });
});

test('run_tests for a workspace with no repository yet is refused at enqueue, naming the reason', async () => {
  const refused = await platform.cli([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-never-patched',
    '--job-id',
    'early-tests',
    '--command',
    'true',
  ]);
  expect(refused.code).toBe(EXIT.failed);
  expect(refused.stderr).toMatch(
    /WORKSPACE_UNKNOWN: workspace ws-never-patched has no repository yet: send an apply_patch first/,
  );
  expect((await platform.cli(['status', 'early-tests'])).code).toBe(EXIT.notFound);
});

test('an unknown workspace is the same error for jobs and workspace show', async () => {
  const jobs = await platform.cli(['jobs', '--workspace', 'nosuch']);
  const show = await platform.cli(['workspace', 'show', 'nosuch']);
  expect([jobs.code, show.code]).toEqual([EXIT.notFound, EXIT.notFound]);
  expect(jobs.stderr).toMatch(/workspace nosuch is not in the ledger/);
  expect(show.stderr).toMatch(/workspace nosuch is not in the ledger/);
});

test("the bin runs from any directory: through a link on the PATH (what npm link makes), from the agent's repository", async () => {
  const linkDir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-link-'));
  const executable = path.join(linkDir, 'agent-jobs');
  await symlink(BIN, executable);
  // The README's walkthrough runs it inside the repository it imports: `.` is that directory.
  const fromRepo = (args: readonly string[]) =>
    runCli([...args, '--state-dir', platform.stateDir], undefined, { cwd: source, executable });

  const imported = await fromRepo(['repo', 'import', '.', '--name', 'from-elsewhere', '--json']);
  expect(imported.code).toBe(0);
  const { url } = JSON.parse(imported.stdout) as { url: string };
  expect(url).toMatch(/\/from-elsewhere\.git$/);
  const [diff] = await diffChain(source, [{ 'elsewhere.txt': 'here\n' }]);
  expect(
    (await fromRepo(applyPatchArgs('ws-elsewhere', 'elsewhere-1', url, 'later', diff ?? '', 'From elsewhere'))).code,
  ).toBe(0);
  expect((await fromRepo(['wait', 'elsewhere-1', '--timeout', '120'])).code).toBe(0);
  const status = await fromRepo(['status', 'elsewhere-1', '--json']);
  expect(JSON.parse(status.stdout)).toMatchObject({ jobId: 'elsewhere-1', status: 'SUCCEEDED' });
  expect((await fromRepo(['--version'])).stdout).toMatch(/^agent-jobs \d+\.\d+\.\d+/);
  await rm(linkDir, { recursive: true, force: true });
});

test('repo import of a name already imported answers the same URL', async () => {
  const again = await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'operator']);
  expect(again.url).toBe(repoUrl);
});

test('an unexpected error is one line; --verbose adds the stack', async () => {
  // A platform description that names this (live) process but ports nothing listens on.
  const dir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-dead-'));
  const info = JSON.parse(await readFile(path.join(platform.stateDir, 'platform.json'), 'utf8')) as Record<
    string,
    unknown
  >;
  const dead = 'http://127.0.0.1:9';
  await writeFile(
    path.join(dir, 'platform.json'),
    JSON.stringify({ ...info, pid: process.pid, endpoints: { sqs: dead, dynamodb: dead, s3: dead } }),
  );
  const plain = await runCli(['status', 'p1', '--state-dir', dir]);
  expect(plain.code).toBe(EXIT.unavailable);
  expect(plain.stderr.trim().split('\n')).toEqual([
    expect.stringMatching(/^agent-jobs: cannot reach local platform .*ECONNREFUSED: is it running/),
  ]);
  const verbose = await runCli(['status', 'p1', '--state-dir', dir, '--verbose']);
  expect(verbose.stderr.trim().split('\n').length).toBeGreaterThan(2);
  expect(verbose.stderr).toMatch(/\n\s+at /);
  await rm(dir, { recursive: true, force: true });
});

/**
 * Every command's `--json`, run as a script would against the jobs the tests above left (succeeded,
 * failed, skipped, refused, conflicting): one JSON object per line on stdout, errors one JSON line
 * on stderr, and no ledger working field anywhere. A command added to the table without a row here
 * fails the first expectation.
 */
const JSON_RUNS: Record<string, readonly (readonly string[])[] | string> = {
  'local up': 'its ready line is checked below (the harness started it with --json)',
  demo: 'runs its own platform: test/e2e/demo.test.ts checks its --json line',
  console: 'serves until Ctrl-C: its --json line is checked by the console test below',
  mcp: 'speaks MCP on stdout instead: test/e2e/mcp.test.ts checks stdout carries the protocol alone and no result carries an internal field',
  'repo import': [['repo', 'import', '.', '--name', 'operator']],
  enqueue: [
    ['enqueue', '--type', 'run_tests', '--workspace', 'ws-conflict', '--job-id', 'json-audit', '--command', 'true'],
  ],
  status: [
    ['status', 'p1'],
    ['status', 'raw-1'],
    ['status', 'poison-2'],
    ['status', 'nosuch'],
  ],
  logs: [
    ['logs', 'tests-once'],
    ['logs', 'p1'],
  ],
  wait: [['wait', 'json-audit', 'tests-once', '--timeout', '120']],
  jobs: [
    ['jobs', '--workspace', 'ws-conflict'],
    ['jobs', '--workspace', 'ws-dlq'],
  ],
  workspaces: [['workspaces']],
  'workspace show': [['workspace', 'show', 'ws-dlq']],
  'workspace unblock': [['workspace', 'unblock', 'ws-conflict', '--drop']],
  'dlq list': [['dlq', 'list']],
  'dlq show': [['dlq', 'show', 'poison-1']],
  'dlq redrive': [['dlq', 'redrive', 'p1']],
  'dlq peek': [['dlq', 'peek']],
  'dlq dismiss': [
    ['dlq', 'dismiss', 'poison-2', '--reason', 'audit'],
    ['dlq', 'dismiss', 'p1', '--reason', 'audit'],
  ],
  cancel: [['cancel', 'p1']],
  unfinished: [['unfinished']],
  doctor: [['doctor']],
};

test('console serves the platform on 127.0.0.1 until Ctrl-C: --json prints its URLs, the token opens its pages, nothing opens them without it', async () => {
  const child = spawn(process.execPath, [BIN, 'console', '--json', '--state-dir', platform.stateDir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
      });
      void exited.then((code) => reject(new Error(`console exited (${code}) before it was ready`)));
    });
    const { url, openUrl } = publicJsonLines(line, 'console --json')[0] as { url: string; openUrl: string };
    expect(new URL(url).hostname).toBe('127.0.0.1');
    expect(await httpGet(`${url}/workspaces`)).toMatchObject({ status: 401 });
    const opened = await httpGet(openUrl);
    expect(opened).toMatchObject({ status: 303, location: expect.stringMatching(/^\/c\/[\w-]+\/workspaces$/) });
    const page = await httpGet(`${url}${opened.location}`, opened.cookie);
    expect(page.status).toBe(200);
    expect(page.body).toContain('id="ws-ws-conflict"');
  } finally {
    child.kill('SIGINT');
  }
  expect(await exited).toBe(0);
});

function httpGet(
  url: string,
  cookie?: string,
): Promise<{ status: number; body: string; location?: string; cookie?: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: cookie ? { Cookie: cookie } : {} }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body,
          location: res.headers.location,
          cookie: res.headers['set-cookie']?.[0]?.split(';')[0],
        }),
      );
    });
    req.once('error', reject);
    req.end();
  });
}

test('every command prints --json as one object per line and never an internal ledger field', async () => {
  expect(Object.keys(JSON_RUNS).sort()).toEqual(COMMANDS.map((c) => c.path.join(' ')).sort());
  expect(internalKeysIn(platform.ready)).toEqual([]);
  const outputs: string[] = [];
  for (const runs of Object.values(JSON_RUNS)) {
    if (typeof runs === 'string') continue;
    for (const args of runs) {
      const result = await runCli([...args, '--json', '--state-dir', platform.stateDir], undefined, { cwd: source });
      const what = `agent-jobs ${args.join(' ')} --json (exit ${result.code})`;
      publicJsonLines(result.stdout, what);
      // A command that failed before it had anything to print says why as one JSON line on stderr
      // (progress notes may come before it); one whose outcome is a failure printed its data.
      if (result.code !== 0 && result.stdout === '') {
        const last = result.stderr.trim().split('\n').pop() ?? '';
        expect({ what, error: Object.keys(publicJsonLines(last, `${what} stderr`)[0] ?? {}) }).toEqual({
          what,
          error: ['error'],
        });
      }
      outputs.push(result.stdout);
    }
  }
  // The audit read records of every kind: a job with a conflict, a failed one, a workspace.
  expect(outputs.join('')).toMatch(/"conflicts":/);
  expect(outputs.join('')).toMatch(/"status":"FAILED"/);
});

test('npm start --reset (npm keeps --reset for itself) still starts from a clean state directory', async () => {
  const stateDir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-npm-'));
  await writeFile(path.join(stateDir, 'stale.txt'), 'left by an earlier run');
  const started = await startPlatform({ stateDir, npmStartArgs: ['--reset'] });
  try {
    expect(existsSync(path.join(stateDir, 'stale.txt'))).toBe(false);
  } finally {
    await started.stop();
  }
});
