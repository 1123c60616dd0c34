/**
 * The hostile-input harness: one hostile message at a time, put raw on the FIFO queue (bypassing
 * the producer, as an attacker or a broken agent would), delivered ONCE to the real sequencer over
 * fauxqs, dynalite and the loopback git server, then judged:
 *
 * - the verdict is permanent on that first delivery: the record is acknowledged (no batch item
 *   failure), nothing waits on the queue for a retry (the back-off is zero, so a retry would be
 *   visible at once), the ledger holds FAILED with the exact reason and the DLQ copy carries it;
 * - the remote is unchanged, read with the git CLI (every ref, and `git fsck --strict` clean);
 * - the workspace works again after the documented recovery: `agent-jobs workspace unblock <id>
 *   --drop` (the real CLI, in process) when the job fenced it, then a new job with a new id is
 *   applied and its commit passes `git fsck --strict`.
 *
 * Rows live in the `*.test.ts` files of this folder, one file per class of input.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { ReceiveMessageCommand, SendMessageCommand, type Message } from '@aws-sdk/client-sqs';
import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { JOB_TYPE_NAMES } from '../../contract/job-types';
import { stringAttributes, wireJson } from '../../contract/messages';
import { S3DiffStore } from '../../src/adapters/diff-store';
import { DynamoDbLedger } from '../../src/adapters/dynamodb-ledger';
import { JsonlEventLog } from '../../src/adapters/events';
import { COMMANDS } from '../../tools/cli/commands';
import { runCli } from '../../tools/cli/main';
import { localSequencerDeps } from '../../src/compose/local';
import { deduplicationId, messageGroupId } from '../../src/core/envelope';
import type { PermanentReason } from '../../src/core/errors';
import { createSequencer } from '../../src/core/sequencer';
import { LOCAL_REGION } from '../../tools/local/emulators';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import type { PlatformInfo } from '../../tools/local/platform';
import { PLATFORM_FILE } from '../../tools/local/state-dir';
import { deliver, drain, queueArn, receive } from '../support/drive-queue';
import { withEmulators, type LocalEmulators } from '../support/emulators';

const run = promisify(execFile);

/** The files of every workspace's first commit. */
export const BASE_FILES: Readonly<Record<string, string | Buffer>> = {
  'README.md': '# hostile\n',
  'src/app.ts': 'export const answer = 42;\n',
  // Not UTF-8: a patch to it must apply byte for byte.
  'legacy/latin1.txt': Buffer.from('caf\xe9\nna\xefve\n', 'latin1'),
};

export interface HostileWorkspace {
  readonly workspaceId: string;
  readonly repoUrl: string;
  readonly gitDir: string;
  /** The branch head before the hostile job. */
  readonly baseSha: string;
}

/** A message as the row sends it: an object (sent as JSON) or the exact body text. */
export interface HostileMessage {
  readonly jobId: string;
  readonly body: string | Record<string, unknown>;
}

export interface HostileRow {
  readonly what: string;
  readonly message: (ws: HostileWorkspace, suite: HostileSuite) => HostileMessage | Promise<HostileMessage>;
  readonly reason: PermanentReason;
  /** A fragment of the failure's message, so the row proves the rule it means. */
  readonly says: RegExp;
  /**
   * The documented recovery, when it is more than the default (`workspace unblock --drop` if the
   * job fenced the workspace, then a new job); it must leave the workspace usable.
   */
  readonly recover?: (suite: HostileSuite, ws: HostileWorkspace, message: HostileMessage) => Promise<void>;
}

/** A new-file diff in git's format. */
export function addFileDiff(path: string, lines: readonly string[] = ['x']): string {
  return [
    `diff --git a/${path} b/${path}`,
    'new file mode 100644',
    '--- /dev/null',
    `+++ b/${path}`,
    `@@ -0,0 +1,${lines.length} @@`,
    ...lines.map((l) => `+${l}`),
    '',
  ].join('\n');
}

/** A valid apply_patch envelope for the workspace; rows override what they attack. */
export function applyPatchJob(
  ws: HostileWorkspace,
  payload: Record<string, unknown> = {},
  envelope: Record<string, unknown> = {},
): HostileMessage {
  const jobId = typeof envelope.jobId === 'string' ? envelope.jobId : `hostile-${randomUUID()}`;
  return {
    jobId,
    body: {
      jobId,
      workspaceId: ws.workspaceId,
      tenantId: 'tenant-hostile',
      type: 'apply_patch',
      createdAt: '2026-02-01T00:00:00.000Z',
      ...envelope,
      payload: {
        repo: { url: ws.repoUrl, branch: 'main' },
        diff: addFileDiff('added.txt'),
        message: 'agent change',
        ...payload,
      },
    },
  };
}

/** Runs the git CLI with a fixed identity; returns stdout without surrounding white space. */
export async function gitIn(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('git', ['-c', 'user.name=Fixture', '-c', 'user.email=fixture@example.com', ...args], {
    cwd,
    maxBuffer: 16 * 1024 * 1024,
  });
  return stdout.trim();
}

/** Every ref of a bare repository and where it points, as the git CLI lists them. */
export const refsOf = (gitDir: string) => gitIn(gitDir, 'for-each-ref', '--format=%(refname) %(objectname)');
export const fsckStrict = (gitDir: string) => gitIn(gitDir, 'fsck', '--strict', '--no-progress', '--no-dangling');

/** What a raw send may forge beyond the body. */
export interface RawOptions {
  /** The `type` attribute. @default 'apply_patch' */
  readonly type?: string;
  /** Attributes added to (or replacing) the triage attributes, e.g. `redrive`. */
  readonly attributes?: Readonly<Record<string, string>>;
  /** @default the producer's, from the job id */
  readonly deduplicationId?: string;
}

export interface HostileSuite {
  newWorkspace(): Promise<HostileWorkspace>;
  /** Sends a message raw to the FIFO queue in the workspace's group, as a producer that skips validation would. */
  sendRaw(ws: HostileWorkspace, message: HostileMessage, options?: RawOptions): Promise<void>;
  /** Receives the one message waiting and delivers it once; it must be its first delivery. */
  deliverOnce(): Promise<SQSBatchResponse>;
  /** The DLQ's messages, left where they are (received with a zero visibility timeout). */
  peekDlq(): Promise<Message[]>;
  /** The state directory the CLI and the MCP server find these emulators by (`--state-dir`, `connect`). */
  stateDir(): string;
  /** Runs the agent-jobs CLI in process against the emulators; returns its exit code and output. */
  cli(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  ledger(): DynamoDbLedger;
  /** The claim-check store the sequencer reads (fauxqs' S3). */
  diffStore(): S3DiffStore;
  /** The emulators' clients, for rows that tamper with what the platform stored. */
  emulators(): LocalEmulators;
  /** The whole judgement described at the top of this file. */
  expectRefusedOnFirstDelivery(row: HostileRow): Promise<void>;
  /**
   * Lifts the fence (`workspace unblock --drop`) if there is one, then a new job with a new id on
   * the workspace's branch applies, and its commit passes `git fsck --strict`.
   */
  expectUsable(ws: HostileWorkspace): Promise<void>;
}

/** Call at describe level: emulators, a git server, the sequencer and a CLI state dir for the file. */
export function hostileSuite(): HostileSuite {
  const emulators = withEmulators();
  let root: string;
  let gitServer: GitServer;
  let ledger: DynamoDbLedger;
  let handler: (event: SQSEvent) => Promise<SQSBatchResponse>;
  let stateDir: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'agent-jobs-hostile-'));
    gitServer = await startGitServer({ root: join(root, 'remotes') });
    const resources = emulators();
    ledger = new DynamoDbLedger({
      client: resources.clients.dynamodb,
      tableName: resources.tableName,
      retentionDays: 30,
    });
    handler = createSequencer(
      localSequencerDeps({
        resources,
        events: new JsonlEventLog(join(root, 'events.jsonl')),
        logger: new Logger({ serviceName: 'hostile', logLevel: 'SILENT' }),
        // Zero: a transient verdict would make the message visible again at once, where the row sees it.
        backoff: { baseSeconds: 0, capSeconds: 0 },
        workRoot: join(root, 'work'),
      }),
    );
    // What `local up` writes (but for the test runner's isolation: none runs here), so the CLI finds these emulators as it finds the local platform.
    stateDir = join(root, 'state');
    const info: Omit<PlatformInfo, 'testIsolation'> = {
      pid: process.pid,
      startedAt: new Date().toISOString(),
      stateDir,
      region: LOCAL_REGION,
      endpoints: resources.endpoints,
      queueUrls: resources.queueUrls,
      dlqUrls: resources.dlqUrls,
      tableName: resources.tableName,
      bucketName: resources.bucketName,
      jobTypes: JOB_TYPE_NAMES,
      ledger: 'memory',
      gitUrl: gitServer.url,
      eventLog: join(root, 'events.jsonl'),
      logFile: join(root, 'platform.log'),
    };
    await mkdir(stateDir, { recursive: true });
    await writeFile(join(stateDir, PLATFORM_FILE), JSON.stringify(info));
  });

  afterAll(async () => {
    await gitServer?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  const sqs = () => emulators().clients.sqs;
  const queueUrl = () => emulators().queueUrls['agent-jobs'] as string;
  const dlqUrl = () => emulators().dlqUrls['agent-jobs'] as string;

  afterEach(async () => {
    await Promise.all([drain(sqs(), queueUrl()), drain(sqs(), dlqUrl())]);
  });

  /** The repository every workspace starts from, made once per file: a workspace is then one clone. */
  let source: Promise<{ dir: string; baseSha: string }> | undefined;
  const makeSource = async () => {
    const dir = await mkdtemp(join(root, 'src-'));
    for (const [path, content] of Object.entries(BASE_FILES)) {
      await mkdir(dirname(join(dir, path)), { recursive: true });
      await writeFile(join(dir, path), content);
    }
    await gitIn(dir, 'init', '-q', '-b', 'main');
    await gitIn(dir, 'add', '.');
    await gitIn(dir, 'commit', '-q', '-m', 'base');
    return { dir, baseSha: await gitIn(dir, 'rev-parse', 'main') };
  };

  const suite: HostileSuite = {
    async newWorkspace() {
      const workspaceId = `ws-${randomUUID().slice(0, 8)}`;
      const { dir, baseSha } = await (source ??= makeSource());
      const gitDir = await gitServer.createBareRepo(workspaceId, { fromDir: dir });
      return { workspaceId, repoUrl: gitServer.repoUrl(workspaceId), gitDir, baseSha };
    },

    async sendRaw(ws, message, { type = 'apply_patch', attributes = {}, deduplicationId: dedupId } = {}) {
      await sqs().send(
        new SendMessageCommand({
          QueueUrl: queueUrl(),
          // Objects as ASCII JSON, so any string in them travels on fauxqs too (contract/messages.ts).
          MessageBody: typeof message.body === 'string' ? message.body : wireJson(message.body),
          MessageGroupId: messageGroupId(ws.workspaceId),
          MessageDeduplicationId: dedupId ?? deduplicationId(message.jobId, 'apply_patch'),
          MessageAttributes: stringAttributes({
            jobId: message.jobId,
            workspaceId: ws.workspaceId,
            tenantId: 'tenant-hostile',
            type,
            ...attributes,
          }),
        }),
      );
    },

    async deliverOnce() {
      const messages = await receive(sqs(), queueUrl());
      expect(messages).toHaveLength(1);
      expect(messages[0]?.Attributes?.ApproximateReceiveCount).toBe('1');
      return deliver(sqs(), queueUrl(), await queueArn(sqs(), queueUrl()), messages, handler);
    },

    async peekDlq() {
      const { Messages } = await sqs().send(
        new ReceiveMessageCommand({
          QueueUrl: dlqUrl(),
          MaxNumberOfMessages: 10,
          VisibilityTimeout: 0,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
      );
      return Messages ?? [];
    },

    async cli(...argv) {
      let stdout = '';
      let stderr = '';
      const io = {
        stdout: (t: string) => void (stdout += t),
        stderr: (t: string) => void (stderr += t),
        stdin: () => [],
        env: {},
        cwd: root,
        untilInterrupted: () => new Promise<void>(() => undefined),
      };
      const code = await runCli([...argv, '--state-dir', stateDir], io, COMMANDS);
      return { code, stdout, stderr };
    },

    stateDir: () => stateDir,
    ledger: () => ledger,
    diffStore: () => new S3DiffStore(emulators().clients.s3, emulators().bucketName),
    emulators,

    async expectRefusedOnFirstDelivery(row) {
      const ws = await suite.newWorkspace();
      // After the row made its message: a row may first give the remote what it attacks.
      const message = await row.message(ws, suite);
      const refsBefore = await refsOf(ws.gitDir);
      await suite.sendRaw(ws, message);

      const response = await suite.deliverOnce();

      // Permanent on the first delivery: acknowledged, and nothing left to retry.
      expect(response.batchItemFailures).toEqual([]);
      expect(await receive(sqs(), queueUrl())).toEqual([]);
      const dlq = await suite.peekDlq();
      expect(
        dlq.map((m) => [m.MessageAttributes?.jobId?.StringValue, m.MessageAttributes?.reason?.StringValue]),
      ).toEqual([[message.jobId, row.reason]]);
      expect(dlq[0]?.MessageAttributes?.errorMessage?.StringValue).toMatch(row.says);
      const record = await ledger.getJob(message.jobId);
      // An envelope that does not parse has no job to record: the DLQ copy is its verdict.
      if (record !== undefined) {
        expect(record).toMatchObject({ status: 'FAILED', attempt: 1, error: { reason: row.reason } });
        expect(record.error?.message).toMatch(row.says);
        // A failed apply_patch fences its workspace (the recovery below has something to lift); an
        // invalid one does not, as the README's failure table says: nothing of it reached the tree.
        const fence =
          row.reason === 'INVALID_JOB'
            ? { state: 'ACTIVE' }
            : { state: 'BLOCKED', blockedBy: message.jobId, blockedReason: row.reason };
        expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject(fence);
      }
      // The remote is exactly as it was.
      expect(await refsOf(ws.gitDir)).toBe(refsBefore);
      await fsckStrict(ws.gitDir);

      await (row.recover ?? ((s, w) => s.expectUsable(w)))(suite, ws, message);
    },

    async expectUsable(ws) {
      const workspace = await ledger.getWorkspace(ws.workspaceId);
      if (workspace?.state === 'BLOCKED') {
        const unblock = await suite.cli('workspace', 'unblock', ws.workspaceId, '--drop');
        expect({ code: unblock.code, stderr: unblock.stderr }).toEqual({ code: 0, stderr: '' });
        expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({ state: 'ACTIVE' });
      }
      // The branch the workspace is bound to (its first job's), else the repository's main.
      const branch = (await ledger.getWorkspace(ws.workspaceId))?.repo?.branch ?? 'main';
      const before = await gitIn(ws.gitDir, 'rev-parse', branch);
      const good = applyPatchJob(ws, {
        repo: { url: ws.repoUrl, branch },
        diff: addFileDiff('recovered.txt', ['after the recovery']),
      });
      await suite.sendRaw(ws, good);
      expect(await suite.deliverOnce()).toEqual({ batchItemFailures: [] });
      expect(await ledger.getJob(good.jobId)).toMatchObject({ status: 'SUCCEEDED' });
      expect(await gitIn(ws.gitDir, 'rev-parse', `${branch}~1`)).toBe(before);
      expect(await gitIn(ws.gitDir, 'show', `${branch}:recovered.txt`)).toBe('after the recovery');
      await fsckStrict(ws.gitDir);
    },
  };
  return suite;
}
