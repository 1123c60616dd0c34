/**
 * Harness of the trust-side hostile-input suite: the real sequencer and stage handlers over the
 * local emulators (fauxqs, dynalite), a loopback git server, the child-process test runner and the
 * local PR store, built the one way the platform builds them (src/compose/local.ts). Hostile input
 * is put on the queues raw, bypassing the producer, and delivered once the way the event source
 * mapping does, so a case can assert a permanent verdict on the first delivery.
 */
import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { SendMessageCommand, type Message } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import {
  BUILD_EVENTS,
  JOB_TYPES,
  SEQUENCER,
  type JobType,
  type JobTypeDeclaration,
  type StagedJobType,
} from '../../contract/job-types';
import { DLQ_ATTRIBUTES } from '../../contract/messages';
import type { GitHostPolicy } from '../../contract/git-remotes';
import {
  localBuildEventsDeps,
  localCommandStageDeps,
  localOpenPrDeps,
  localSequencerDeps,
  ownGitServerPolicy,
  type LocalWorkerOptions,
} from '../../src/compose/local';
import { createBuildEventsHandler } from '../../src/core/build-completion';
import { createCommandStageHandler } from '../../src/core/jobs/command-stage';
import { createOpenPrHandler } from '../../src/core/jobs/open-pr';
import { createSequencer } from '../../src/core/sequencer';
import {
  deduplicationId,
  jobAttributes,
  messageGroupId,
  type JobEnvelope,
  type StageMessage,
} from '../../src/core/envelope';
import type { JobRecord, Ledger, WorkspaceRecord } from '../../src/core/ports';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import { resolveBranchHead } from '../../src/adapters/git';
import { LocalPullRequestStore } from '../../tools/local/pr-store';
import { LocalTestRunner, localRunEventBody, parseLocalRunEvent } from '../../tools/local/test-runner';
import { deliver, drain, driveQueue, queueArn, receive } from '../support/drive-queue';
import { withEmulators } from '../support/emulators';
import { createRepo, git, removeDir, tempDir } from '../support/git-fixtures';

export const TENANT = 'tenant-h';
export const CREATED_AT = '2026-11-30T10:00:00.000Z';

export type QueueName = 'agent-jobs' | 'run-tests' | 'run-lint' | 'open-pr';
/** The FIFO queue first: settling drives them in this order. */
const QUEUES: readonly QueueName[] = [
  SEQUENCER.queue as 'agent-jobs',
  ...(Object.keys(JOB_TYPES) as JobType[]).flatMap((t) => stageQueueOf(t)),
];

function stageQueueOf(type: JobType): QueueName[] {
  const decl: JobTypeDeclaration = JOB_TYPES[type];
  return decl.stage ? [decl.stage.queue as QueueName] : [];
}

export interface Workspace {
  readonly workspaceId: string;
  readonly repoUrl: string;
  readonly gitDir: string;
  readonly branch: string;
}

/** A DLQ message as an operator triages it. */
export interface DeadLetter {
  readonly body: string;
  readonly reason: string | undefined;
  readonly errorMessage: string | undefined;
  readonly groupId: string | undefined;
}

export interface RawSend {
  /** FIFO only. @default ws#<workspaceId of the body>, or a random group for a body that is not JSON */
  readonly groupId?: string;
  /** FIFO only. @default a fresh id */
  readonly dedupId?: string;
  readonly attributes?: Record<string, string>;
}

export interface TrustHarness {
  readonly git: GitServer;
  readonly ledger: Ledger;
  readonly prStore: LocalPullRequestStore;
  readonly runner: LocalTestRunner;
  readonly events: { type: string; detail: Record<string, unknown> }[];
  /** A fresh repository on the git server: main (README.md, test.sh) and the workspace branch. */
  workspace(): Promise<Workspace>;
  /** Every ref of the workspace's remote with its commit: equal snapshots mean the remote is unchanged. */
  refs(ws: Workspace): Promise<string>;
  /** A valid apply_patch job of the workspace adding `file`. */
  patchJob(
    ws: Workspace,
    file: string,
    overrides?: Partial<JobEnvelope<'apply_patch'>['payload']>,
  ): JobEnvelope<'apply_patch'>;
  job<T extends JobEnvelope['type']>(ws: Workspace, type: T, payload: JobEnvelope<T>['payload']): JobEnvelope<T>;
  /** Puts a body on a queue as it is, with the producer's group and dedup id unless told otherwise. */
  sendRaw(queue: QueueName, body: string, options?: RawSend): Promise<void>;
  /** Sends a valid job to the FIFO queue the way the producer does. */
  send(job: JobEnvelope): Promise<void>;
  /** One receive of one message and one invocation of the queue's handler. */
  deliverOnce(queue: QueueName): Promise<{ acknowledged: boolean }>;
  /** Delivers until the queue is empty (failures come back at once: zero back-off). */
  drive(queue: QueueName): Promise<void>;
  /** Drives the FIFO queue, then every stage queue, until each is empty (run_tests: until its runs are recorded). */
  settle(): Promise<void>;
  /**
   * A staged job pinned for real: an apply_patch binds the workspace, the sequencer pins `job` and
   * forwards it; the forwarded message is taken off its stage queue and returned (to replay or alter).
   */
  pinnedForReal<T extends StagedJobType>(ws: Workspace, job: JobEnvelope<T>): Promise<StageMessage<T>>;
  /** Reads and deletes the queue's DLQ. */
  deadLetters(queue: QueueName): Promise<DeadLetter[]>;
  getJob(jobId: string): Promise<JobRecord | undefined>;
  getWorkspace(workspaceId: string): Promise<WorkspaceRecord | undefined>;
}

export interface TrustHarnessOptions {
  /**
   * The sequencer's git hosts policy, read at each delivery (a case may change it between two).
   * @default the git server's own host and port, as the local platform allows
   */
  readonly gitHosts?: (server: GitServer) => GitHostPolicy;
}

/** Call at describe level; the getter is valid inside tests and hooks. */
export function withTrustHarness(options: TrustHarnessOptions = {}): () => TrustHarness {
  const emulators = withEmulators();
  let root: string;
  let harness: TrustHarness | undefined;
  let gitServer: GitServer | undefined;
  let runner: LocalTestRunner | undefined;

  beforeAll(async () => {
    root = await tempDir('hostile-trust');
    gitServer = await startGitServer({ root: join(root, 'remotes') });
    // A run's exit is its completion event on the build-events queue, as the local platform wires it.
    const { clients, queueUrls } = emulators();
    runner = new LocalTestRunner({
      stateDir: join(root, 'runner'),
      // Unconfined: the cases prove that nothing ran by a mark a command would leave outside its run, which no confined run can.
      confinement: { kind: 'none', reason: 'the trust cases witness runs by marks outside them' },
      onFinished: async (completion) => {
        await clients.sqs.send(
          new SendMessageCommand({
            QueueUrl: queueUrls[BUILD_EVENTS.queue],
            MessageBody: localRunEventBody(completion),
          }),
        );
      },
    });
    harness = build(
      emulators(),
      gitServer,
      runner,
      root,
      options.gitHosts ?? ((server) => ownGitServerPolicy(server.url)),
    );
  });

  afterEach(async () => {
    // Every case starts with empty queues and DLQs.
    const { clients, queueUrls, dlqUrls } = emulators();
    await Promise.all(
      [...QUEUES, BUILD_EVENTS.queue].flatMap((q) => [
        drain(clients.sqs, queueUrls[q]!),
        drain(clients.sqs, dlqUrls[q]!),
      ]),
    );
    harness?.events.splice(0);
  });

  afterAll(async () => {
    await runner?.close();
    await gitServer?.close();
    if (root) await removeDir(root);
  });

  return () => {
    if (!harness) throw new Error('the trust harness is not running: call withTrustHarness() at describe level');
    return harness;
  };
}

type Handler = (event: SQSEvent) => Promise<SQSBatchResponse>;

function build(
  emulators: ReturnType<ReturnType<typeof withEmulators>>,
  gitServer: GitServer,
  runner: LocalTestRunner,
  root: string,
  gitHosts: (server: GitServer) => GitHostPolicy,
): TrustHarness {
  const { clients, queueUrls, dlqUrls } = emulators;
  const events: TrustHarness['events'] = [];
  const options: LocalWorkerOptions = {
    resources: emulators,
    events: { publish: async (type, detail) => void events.push({ type, detail }) },
    logger: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
    metrics: { count: () => undefined },
    backoff: { baseSeconds: 0, capSeconds: 0 },
  };
  const policy: GitHostPolicy = {
    get hosts() {
      return gitHosts(gitServer).hosts;
    },
    get localAddresses() {
      return gitHosts(gitServer).localAddresses;
    },
  };
  const sequencerDeps = localSequencerDeps({ ...options, workRoot: join(root, 'sequencer'), gitHosts: policy });
  const prStore = new LocalPullRequestStore(join(root, 'prs'), {
    branchHead: (url, branch) => resolveBranchHead(url, branch),
  });
  const completeBuilds = createBuildEventsHandler(localBuildEventsDeps({ ...options, parse: parseLocalRunEvent }));
  const handlers: Record<QueueName, Handler> = {
    'agent-jobs': createSequencer(sequencerDeps),
    'run-tests': createCommandStageHandler('run_tests', localCommandStageDeps('run_tests', { ...options, runner })),
    'run-lint': createCommandStageHandler('run_lint', localCommandStageDeps('run_lint', { ...options, runner })),
    'open-pr': createOpenPrHandler(localOpenPrDeps({ ...options, host: prStore })),
  };
  const { ledger } = sequencerDeps;
  const arns = new Map<QueueName, Promise<string>>();
  const arnOf = (queue: QueueName) => {
    let arn = arns.get(queue);
    if (!arn) arns.set(queue, (arn = queueArn(clients.sqs, queueUrls[queue]!)));
    return arn;
  };

  const harness: TrustHarness = {
    git: gitServer,
    ledger,
    prStore,
    runner,
    events,
    async workspace() {
      const workspaceId = `ws-${randomUUID().slice(0, 8)}`;
      const src = join(root, `src-${workspaceId}`);
      await mkdir(src);
      await createRepo(src, { 'README.md': 'hostile\n', 'test.sh': 'echo tests pass\n' });
      const branch = `agent/${workspaceId}`;
      await git(src, 'branch', branch);
      const gitDir = await gitServer.importRepository(src, workspaceId);
      return { workspaceId, repoUrl: gitServer.repoUrl(workspaceId), gitDir, branch };
    },
    refs: (ws) => git(ws.gitDir, 'for-each-ref', '--format=%(refname) %(objectname)'),
    patchJob(ws, file, overrides = {}) {
      return harness.job(ws, 'apply_patch', {
        repo: { url: ws.repoUrl, branch: ws.branch },
        diff: `diff --git a/${file} b/${file}\nnew file mode 100644\n--- /dev/null\n+++ b/${file}\n@@ -0,0 +1 @@\n+${file}\n`,
        message: `add ${file}`,
        ...overrides,
      });
    },
    job(ws, type, payload) {
      return {
        jobId: `job-${randomUUID()}`,
        workspaceId: ws.workspaceId,
        tenantId: TENANT,
        type,
        createdAt: CREATED_AT,
        payload,
      } as JobEnvelope<typeof type>;
    },
    async sendRaw(queue, body, raw = {}) {
      const fifo = queue === SEQUENCER.queue;
      const parsed = safeJson(body);
      const groupId =
        raw.groupId ??
        (typeof parsed?.['workspaceId'] === 'string' ? messageGroupId(parsed['workspaceId']) : `g-${randomUUID()}`);
      const attributes = raw.attributes ?? attributesOf(parsed);
      await clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: queueUrls[queue],
          MessageBody: body,
          MessageAttributes: Object.fromEntries(
            Object.entries(attributes).map(([k, v]) => [k, { DataType: 'String', StringValue: v }]),
          ),
          ...(fifo ? { MessageGroupId: groupId, MessageDeduplicationId: raw.dedupId ?? randomUUID() } : {}),
        }),
      );
    },
    async send(job) {
      await harness.sendRaw(SEQUENCER.queue as QueueName, JSON.stringify(job), {
        dedupId: deduplicationId(job.jobId, job.type),
      });
    },
    async deliverOnce(queue) {
      const messages = await receiveOne(queue);
      const response = await deliver(clients.sqs, queueUrls[queue]!, await arnOf(queue), messages, handlers[queue]);
      return { acknowledged: response.batchItemFailures.length === 0 };
    },
    async drive(queue) {
      await driveQueue({ sqs: clients.sqs, queueUrl: queueUrls[queue]!, handler: handlers[queue], maxBatches: 50 });
      if (queue !== 'run-tests') return;
      // The stage started the runs and acknowledged: their exits complete the jobs through the build-events queue.
      await runner.settled();
      await driveQueue({
        sqs: clients.sqs,
        queueUrl: queueUrls[BUILD_EVENTS.queue]!,
        handler: completeBuilds,
        maxBatches: 50,
      });
    },
    async settle() {
      for (const queue of QUEUES) await harness.drive(queue);
    },
    async pinnedForReal(ws, job) {
      await harness.send(harness.patchJob(ws, `bind-${randomUUID().slice(0, 8)}.txt`));
      await harness.send(job as JobEnvelope);
      await harness.drive(SEQUENCER.queue as QueueName);
      const queue = stageQueueOf(job.type)[0]!;
      const [forwarded, ...others] = await drain(clients.sqs, queueUrls[queue]!);
      if (!forwarded?.Body || others.length)
        throw new Error(`expected one forwarded message on ${queue}, got ${others.length + (forwarded ? 1 : 0)}`);
      return JSON.parse(forwarded.Body) as StageMessage<typeof job.type>;
    },
    async deadLetters(queue) {
      return (await drain(clients.sqs, dlqUrls[queue]!)).map(deadLetter);
    },
    getJob: (jobId) => ledger.getJob(jobId),
    getWorkspace: (workspaceId) => ledger.getWorkspace(workspaceId),
  };

  /** fauxqs hands out a received message at once; a short long-poll covers a send that is still landing. */
  async function receiveOne(queue: QueueName): Promise<Message[]> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const messages = await receive(clients.sqs, queueUrls[queue]!, 1);
      if (messages.length) return messages;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`no message on ${queue} to deliver`);
  }

  return harness;
}

function safeJson(body: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The producer's triage attributes when the body carries the ids, else none. */
function attributesOf(body: Record<string, unknown> | undefined): Record<string, string> {
  const { jobId, workspaceId, tenantId, type } = body ?? {};
  if ([jobId, workspaceId, tenantId, type].every((v) => typeof v === 'string' && v !== '')) {
    return jobAttributes({ jobId, workspaceId, tenantId, type } as Pick<
      JobEnvelope,
      'jobId' | 'workspaceId' | 'tenantId' | 'type'
    >);
  }
  return {};
}

function deadLetter(message: Message): DeadLetter {
  const attr = (name: string) => message.MessageAttributes?.[name]?.StringValue;
  return {
    body: message.Body ?? '',
    reason: attr(DLQ_ATTRIBUTES.reason),
    errorMessage: attr(DLQ_ATTRIBUTES.errorMessage),
    groupId: message.Attributes?.MessageGroupId,
  };
}
