/**
 * Hostile input, trust side, end to end: the local platform started by `agent-jobs local up`,
 * attacked through the CLI (a test command, a credential in a URL) and with raw queue messages (a
 * forged stage message, a FIFO message in another group), as an agent or anyone who can reach the
 * queues would. What is checked is what an operator sees: job status, the DLQ, the repositories.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { createLocalClients } from '../../tools/local/emulators';
import { repositoryDir, PLATFORM_FILE, REPOSITORIES_DIR } from '../../tools/local/state-dir';
import {
  applyPatchArgs,
  diffChain,
  git,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from '../e2e/harness';
import { eventually } from '../support/eventually';
import { MACHINE_CONFINES, processesSleeping } from '../support/processes';

jest.setTimeout(240_000);

interface JobJson {
  jobId: string;
  status: string;
  pin?: { sha: string };
  result?: { verdict?: string; logTail?: string; exitCode?: number };
  error?: { reason: string; message: string };
}
/** A message as `dlq peek` shows it: these messages have no job record, so `dlq list` (the ledger's) cannot. */
interface PeekedMessage {
  messageId: string;
  attributes: Record<string, string>;
}

let platform: RunningPlatform;
let source: string;
let repoUrl: string;
let scratch: string;
/** Every ref of every repository of the platform, read from disk. */
const refsOf = (name: string) =>
  git(repositoryDir(platform.stateDir, name), 'for-each-ref', '--format=%(refname) %(objectname)');

beforeAll(async () => {
  platform = await startPlatform();
  scratch = await mkdtemp(path.join(tmpdir(), 'agent-jobs-hostile-e2e-'));
  source = await makeRepository({ 'app.txt': 'one\n', 'test.sh': 'exit 0\n' }, ['agent/mine', 'agent/theirs']);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'trust'])).url;
  await platform.cliJson(['repo', 'import', source, '--name', 'other']);
  const [diff] = await diffChain(source, [{ 'app.txt': 'two\n' }]);
  await platform.cliJson(applyPatchArgs('ws-mine', 'mine-1', repoUrl, 'agent/mine', diff ?? '', 'Bind the workspace'));
  expect((await platform.cliJson<{ succeeded: boolean }>(['wait', 'mine-1', '--timeout', '120'])).succeeded).toBe(true);
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

function dlq(queue: string): Promise<PeekedMessage[]> {
  return platform.cliLines<PeekedMessage>(['dlq', 'peek', '--queue', queue]);
}

test('a test command that tries to leave its workspace reaches nothing: no platform files, no real HOME, no fetch, no push', async () => {
  const headOf = async () => {
    const { head, repo, state } = await platform.cliJson<{ head: string; repo: unknown; state: string }>([
      'workspace',
      'show',
      'ws-mine',
    ]);
    return { head, repo, state };
  };
  const before = { trust: await refsOf('trust'), other: await refsOf('other'), workspace: await headOf() };
  const platformFile = path.join(platform.stateDir, PLATFORM_FILE);
  expect(existsSync(platformFile)).toBe(true);
  const attempt = (name: string, command: string) =>
    `if ${command} >/dev/null 2>&1; then echo "${name}: REACHED"; escaped=1; else echo "${name}: refused"; fi;`;
  const command = [
    'escaped=0;',
    ...['..', '../..', '../../..', '../../../..'].map((up) => attempt(`climb ${up}`, `cat ${up}/${PLATFORM_FILE}`)),
    attempt(
      'real home',
      `test -e "$HOME/.gitconfig" -o -e "$HOME/.npmrc" -o -e "$HOME/.ssh" -o "$(ls -A "$HOME")" != ""`,
    ),
    // By absolute path: only an OS boundary stops these (the runner's confinement, where the machine allows it).
    ...(MACHINE_CONFINES
      ? [
          attempt('platform file by absolute path', `cat ${platformFile}`),
          attempt(
            'hosted repositories by absolute path',
            `test -n "$(ls -A ${path.join(platform.stateDir, REPOSITORIES_DIR)})"`,
          ),
          attempt('the platform process', `kill -0 ${platform.pid}`),
        ]
      : []),
    attempt('platform env', 'env | cut -d= -f1 | grep -q -e ^AWS_ -e ^AGENT_JOBS_STATE -e ^NODE_'),
    attempt('clone own repository', 'git clone -q "$REPO_URL" "$TMPDIR/c"'),
    attempt('push own branch', 'git push -q "$REPO_URL" HEAD:refs/heads/agent/mine'),
    attempt('push other branch', 'git push -q "$REPO_URL" HEAD:refs/heads/agent/theirs'),
    attempt('push new branch', 'git push -q "$REPO_URL" HEAD:refs/heads/stolen'),
    attempt('push other repository', `git push -q "$(dirname "$REPO_URL")/other.git" HEAD:refs/heads/agent/theirs`),
    'exit $escaped',
  ].join(' ');

  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-mine',
    '--job-id',
    'mine-escape',
    '--command',
    command,
  ]);
  await platform.cli(['wait', 'mine-escape', '--timeout', '120']);

  const job = await platform.cliJson<JobJson>(['status', 'mine-escape']);
  const report = job.result?.logTail ?? JSON.stringify(job);
  expect(report).not.toContain('REACHED');
  expect(report.split('\n').filter((l) => l.endsWith(': refused'))).toHaveLength(MACHINE_CONFINES ? 14 : 11);
  expect(job).toMatchObject({ status: 'SUCCEEDED', result: { verdict: 'passed' } });
  expect(await refsOf('trust')).toBe(before.trust);
  expect(await refsOf('other')).toBe(before.other);
  expect(await headOf()).toEqual(before.workspace);
});

test("a test timeout ends the job and the setsid'd process that holds its output", async () => {
  const tag = `1000.${process.pid}`;
  const command = `setsid sh -c 'echo escapee started; exec sleep ${tag}' & sleep 300`;
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-mine',
    '--job-id',
    'mine-hangs',
    '--command',
    command,
    '--timeout-seconds',
    '2',
  ]);
  await platform.cli(['wait', 'mine-hangs', '--timeout', '120']);

  expect(await platform.cliJson<JobJson>(['status', 'mine-hangs'])).toMatchObject({
    status: 'FAILED',
    error: { reason: 'TEST_RUN_ERROR', message: expect.stringMatching(/TIMED_OUT: .*\n(.*\n)*escapee started/) },
  });
  await eventually(
    async () => processesSleeping(tag),
    (left) => left.length === 0,
    { what: `the process sleeping ${tag} to be gone` },
  );
});

test('a forged message on the run-tests queue runs nothing and waits on its DLQ as UNPINNED', async () => {
  const info = JSON.parse(await readFile(path.join(platform.stateDir, PLATFORM_FILE), 'utf8')) as {
    endpoints: Parameters<typeof createLocalClients>[0];
    queueUrls: Record<string, string>;
  };
  const mark = path.join(scratch, `forged-${randomUUID()}`);
  const head = (await refsOf('trust'))
    .split('\n')
    .find((l) => l.startsWith('refs/heads/agent/mine '))
    ?.split(' ')[1];
  const forged = {
    jobId: 'forged-1',
    workspaceId: 'ws-mine',
    tenantId: 'default',
    type: 'run_tests',
    createdAt: new Date().toISOString(),
    payload: { command: `touch ${mark}` },
    pin: { sha: head, repoUrl, branch: 'agent/mine' },
  };
  const clients = createLocalClients(info.endpoints);
  try {
    await clients.sqs.send(
      new SendMessageCommand({ QueueUrl: info.queueUrls['run-tests'], MessageBody: JSON.stringify(forged) }),
    );
  } finally {
    clients.destroy();
  }

  const forgedOnDlq = (messages: PeekedMessage[]) =>
    messages.find(
      (m) => m.attributes.jobId === undefined && /no record of job forged-1/.test(m.attributes.errorMessage ?? ''),
    );
  const messages = await eventually(
    () => dlq('run-tests'),
    (m) => forgedOnDlq(m) !== undefined,
    { what: 'the forged message on the run-tests DLQ', timeoutMs: 60_000 },
  );
  expect(forgedOnDlq(messages)?.attributes.reason).toBe('UNPINNED');
  expect(existsSync(mark)).toBe(false);
  expect((await platform.cli(['status', 'forged-1'])).code).not.toBe(0);
});

test("a credential in the repository URL is refused before anything is sent, whatever the scheme's case, and never echoed", async () => {
  const [diff] = await diffChain(source, [{ 'app.txt': 'three\n' }]);
  const leaky = repoUrl.replace('http://', 'HTTP://bot:ghp_TOPSECRET@');
  const result = await platform.cli(applyPatchArgs('ws-leak', 'leak-1', leaky, 'agent/mine', diff ?? '', 'Leak'));

  expect(result.code).not.toBe(0);
  // Named by the flag the user typed (enqueue speaks in flags, not payload paths).
  expect(result.stderr).toContain('--repo: must not carry credentials');
  expect(`${result.stdout}${result.stderr}`).not.toContain('ghp_TOPSECRET');
  expect((await platform.cli(['status', 'leak-1'])).code).not.toBe(0);
});

test("a raw FIFO message outside its workspace's group is refused as INVALID_JOB and the workspace goes on", async () => {
  const info = JSON.parse(await readFile(path.join(platform.stateDir, PLATFORM_FILE), 'utf8')) as {
    endpoints: Parameters<typeof createLocalClients>[0];
    queueUrls: Record<string, string>;
  };
  const job = {
    jobId: 'misgrouped-1',
    workspaceId: 'ws-mine',
    tenantId: 'default',
    type: 'run_tests',
    createdAt: new Date().toISOString(),
    payload: { command: 'true' },
  };
  const clients = createLocalClients(info.endpoints);
  try {
    await clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: info.queueUrls['agent-jobs'],
        MessageBody: JSON.stringify(job),
        MessageGroupId: 'everything',
        MessageDeduplicationId: randomUUID(),
      }),
    );
  } finally {
    clients.destroy();
  }

  const refused = (m: PeekedMessage[]) =>
    m.some(
      (x) =>
        x.attributes.reason === 'INVALID_JOB' &&
        x.attributes.errorMessage?.includes('job misgrouped-1: the message group must be ws#ws-mine'),
    );
  await eventually(() => dlq('agent-jobs'), refused, { what: 'misgrouped-1 on the FIFO DLQ', timeoutMs: 60_000 });
  expect((await platform.cli(['status', 'misgrouped-1'])).code).not.toBe(0);
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-mine',
    '--job-id',
    'mine-after',
    '--command',
    'true',
  ]);
  expect((await platform.cliJson<{ succeeded: boolean }>(['wait', 'mine-after', '--timeout', '120'])).succeeded).toBe(
    true,
  );
});

test("an apply_patch naming a git host other than the platform's own server is refused as HOST_NOT_ALLOWED and binds nothing", async () => {
  const [diff] = await diffChain(source, [{ 'app.txt': 'elsewhere\n' }]);
  const own = new URL(repoUrl);
  const elsewhere = `http://${own.hostname}:${Number(own.port) === 65535 ? 1 : Number(own.port) + 1}/trust.git`;
  await platform.cliJson(
    applyPatchArgs('ws-elsewhere', 'elsewhere-1', elsewhere, 'agent/mine', diff ?? '', 'Elsewhere'),
  );
  await platform.cli(['wait', 'elsewhere-1', '--timeout', '120']);

  expect(await platform.cliJson<JobJson>(['status', 'elsewhere-1'])).toMatchObject({
    status: 'FAILED',
    error: {
      reason: 'HOST_NOT_ALLOWED',
      message: expect.stringContaining(`is not in the configured git hosts (${own.host})`),
    },
  });
  expect((await platform.cli(['workspace', 'show', 'ws-elsewhere'])).stdout).not.toContain('trust.git');
});
