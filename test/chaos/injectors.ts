/**
 * Fault injectors of the platform process, at its boundaries only: SDK middleware on the emulators'
 * clients (DynamoDB, SQS) and wrappers around the ports the workers use (the git remote, the test
 * runner). The code under test is not touched. A kill point ends the process with SIGKILL, as a
 * crashed Lambda or a pulled plug would: nothing after it runs, no lease is released, no message
 * deleted.
 */
import { InternalServerError, ProvisionedThroughputExceededException } from '@aws-sdk/client-dynamodb';
import { ChangeMessageVisibilityCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { TransientJobError } from '../../src/core/errors';
import type { BuildFinder, CommandRun, TestRunner, WorkspaceGit } from '../../src/core/ports';
import { processesSleeping } from '../support/processes';
import { GIT_SLOW_MS, type FaultRates, type SelfKill } from './config';
import type { FaultLog } from './fault-log';
import type { Random } from './random';

export interface Injection {
  readonly rng: Random;
  readonly rates: FaultRates;
  readonly log: FaultLog;
}

const DYNAMODB_WRITES = new Set(['UpdateItemCommand', 'PutItemCommand', 'DeleteItemCommand']);

/** A server-side SQS failure, shaped like the SDK's own (the pipeline classifies it as unknown: transient). */
function sqsServerError(operation: string): Error {
  return Object.assign(new Error(`chaos: ${operation} failed (500 InternalError)`), {
    name: 'InternalError',
    $fault: 'server',
    $metadata: { httpStatusCode: 500 },
  });
}

/**
 * DynamoDB faults: throttling and 500s before a request, and a 500 after a write that applied,
 * either seen by the application (outside the SDK's retries) or retried by the SDK, whose retry
 * then meets its own write.
 */
export function injectDynamoDbFaults(client: DynamoDBDocumentClient, { rng, rates, log }: Injection): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = String(context.commandName);
      if (rng.chance(rates.dynamodbThrottle)) {
        log.record('dynamodb.throttle', command);
        throw new ProvisionedThroughputExceededException({
          message: 'chaos: throughput exceeded',
          $metadata: { httpStatusCode: 400 },
        });
      }
      if (rng.chance(rates.dynamodb5xx)) {
        log.record('dynamodb.5xx', command);
        throw new InternalServerError({ message: 'chaos: internal server error', $metadata: { httpStatusCode: 500 } });
      }
      const output = await next(args);
      if (DYNAMODB_WRITES.has(command) && rng.chance(rates.dynamodb5xxAfterWrite)) {
        log.record('dynamodb.5xx-after-write', command);
        throw new InternalServerError({
          message: 'chaos: internal server error after the write',
          $metadata: { httpStatusCode: 500 },
        });
      }
      return output;
    },
    { step: 'initialize', name: 'chaosDynamoDbFaults' },
  );
  // Inside the SDK's retry loop (finalizeRequest, below the retry middleware): the SDK retries the 500.
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const output = await next(args);
      const command = String(context.commandName);
      if (DYNAMODB_WRITES.has(command) && rng.chance(rates.dynamodb5xxAfterWriteRetried)) {
        log.record('dynamodb.5xx-after-write-retried', command);
        throw new InternalServerError({
          message: 'chaos: internal server error after the write',
          $metadata: { httpStatusCode: 500 },
        });
      }
      return output;
    },
    { step: 'finalizeRequest', priority: 'low', name: 'chaosDynamoDbRetriedFaults' },
  );
}

export interface SqsInjection extends Injection {
  /** A client without faults, for the injector's own calls. */
  readonly raw: SQSClient;
  /** Called before each DeleteMessageBatch: the kill point `before-delete`. */
  readonly beforeDelete: () => void;
  /** Jobs delivered a second time: their first worker pauses past its lease (see gitWithFaults). */
  readonly paused: Set<string>;
}

/**
 * SQS faults: failed deletes and visibility changes, sends whose answer is lost, failed receives,
 * and second deliveries: a received message made visible again while its worker still runs it.
 */
export function injectSqsFaults(client: SQSClient, { rng, rates, log, raw, beforeDelete, paused }: SqsInjection): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = String(context.commandName);
      const input = args.input as { QueueUrl?: string };
      switch (command) {
        case 'DeleteMessageBatchCommand':
          beforeDelete();
          if (rng.chance(rates.sqsDeleteError)) {
            log.record('sqs.delete-error');
            throw sqsServerError('DeleteMessageBatch');
          }
          break;
        case 'ChangeMessageVisibilityCommand':
          if (rng.chance(rates.sqsVisibilityError)) {
            log.record('sqs.visibility-error');
            throw sqsServerError('ChangeMessageVisibility');
          }
          break;
        case 'ReceiveMessageCommand':
          if (rng.chance(rates.sqsReceiveError)) {
            log.record('sqs.receive-error');
            throw sqsServerError('ReceiveMessage');
          }
          break;
      }
      const output = await next(args);
      if (command === 'SendMessageCommand' && rng.chance(rates.sqsSendLostResponse)) {
        log.record('sqs.send-lost-response');
        throw sqsServerError('SendMessage');
      }
      if (command === 'ReceiveMessageCommand') {
        for (const message of (output.output as { Messages?: Message[] }).Messages ?? []) {
          if (!rng.chance(rates.sqsDuplicateDelivery) || !input.QueueUrl) continue;
          const jobId = message.MessageAttributes?.jobId?.StringValue;
          log.record('sqs.duplicate-delivery', jobId);
          if (jobId) paused.add(jobId);
          const queueUrl = input.QueueUrl;
          // Shortly after the worker got it, as if its visibility timeout had run out.
          setTimeout(() => {
            raw
              .send(
                new ChangeMessageVisibilityCommand({
                  QueueUrl: queueUrl,
                  ReceiptHandle: message.ReceiptHandle,
                  VisibilityTimeout: 0,
                }),
              )
              .catch(() => undefined);
          }, 200).unref();
        }
      }
      return output;
    },
    { step: 'initialize', name: 'chaosSqsFaults' },
  );
}

/** Counts the kill points of this life and kills the process at the planned one. */
export class KillSwitch {
  private readonly seen = new Map<SelfKill['at'], number>();

  constructor(
    private readonly plan: SelfKill | undefined,
    private readonly log: FaultLog,
  ) {}

  reached(at: SelfKill['at'], detail?: string): void {
    const count = (this.seen.get(at) ?? 0) + 1;
    this.seen.set(at, count);
    if (this.plan?.at !== at || this.plan.nth !== count) return;
    this.log.record(`kill.${at}`, detail);
    process.kill(process.pid, 'SIGKILL');
  }
}

/**
 * The git remote with a kill point right after a push, before anything reaches the ledger, and a
 * paused worker: the first worker of a job delivered twice stops before its push until its lease
 * has run out, so the second delivery takes the job over while the first still holds a stale claim.
 */
export function gitWithFaults(git: WorkspaceGit, kill: KillSwitch, paused: Set<string>, log: FaultLog): WorkspaceGit {
  return {
    branchHead: (repoUrl, branch) => git.branchHead(repoUrl, branch),
    async commitPatch(request) {
      if (paused.delete(request.jobId)) {
        log.record('worker.paused-past-lease', request.jobId);
        await new Promise((resolve) => setTimeout(resolve, GIT_SLOW_MS));
      }
      const result = await git.commitPatch(request);
      if (!result.alreadyApplied) kill.reached('after-push', request.jobId);
      return result;
    },
  };
}

/** The test runner checking out each pinned commit from `direct(repoUrl)`: the git host without the proxy. */
export function directCheckout(
  runner: TestRunner & Partial<BuildFinder>,
  direct: (repoUrl: string) => string,
): TestRunner & Partial<BuildFinder> {
  const redirected = <R extends Pick<CommandRun, 'job'>>(run: R): R => ({
    ...run,
    job: { ...run.job, pin: { ...run.job.pin, repoUrl: direct(run.job.pin.repoUrl) } },
  });
  return {
    start: (run) => runner.start(redirected(run)),
    describe: (buildIds) => runner.describe(buildIds),
    ...(runner.findBuild
      ? {
          findBuild: (run: Pick<CommandRun, 'job' | 'run' | 'key'>) =>
            runner.findBuild?.(redirected(run)) ?? Promise.resolve(undefined),
        }
      : {}),
  };
}

/**
 * The test runner with a kill point while a test command runs: after each start, once a process
 * sleeps the scenario's run tag (a command in progress, its sandbox set up), the point
 * `during-run` is reached.
 */
export function killDuringRuns(
  runner: TestRunner & Partial<BuildFinder>,
  kill: KillSwitch,
  runTag: string,
): TestRunner & Partial<BuildFinder> {
  const whileRunning = async (jobId: string) => {
    for (let waited = 0; waited < 20_000; waited += 50) {
      if (processesSleeping(runTag).length > 0) {
        kill.reached('during-run', jobId);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  return {
    async start(run) {
      const started = await runner.start(run);
      void whileRunning(run.job.jobId);
      return started;
    },
    describe: (buildIds) => runner.describe(buildIds),
    ...(runner.findBuild ? { findBuild: runner.findBuild.bind(runner) } : {}),
  };
}

/** The test runner with failures before a start, after a start (its answer lost), and on a status read (the reconciler's). */
export function faultyRunner(
  runner: TestRunner & Partial<BuildFinder>,
  { rng, rates, log }: Injection,
): TestRunner & Partial<BuildFinder> {
  return {
    async start(run) {
      if (rng.chance(rates.runnerStartError)) {
        log.record('runner.start-error', run.job.jobId);
        throw new TransientJobError('chaos: the test runner refused the start (503)');
      }
      const started = await runner.start(run);
      if (rng.chance(rates.runnerStartLost)) {
        log.record('runner.start-lost', run.job.jobId);
        throw new TransientJobError('chaos: the start answer was lost');
      }
      return started;
    },
    async describe(buildIds) {
      if (rng.chance(rates.runnerPollError)) {
        log.record('runner.poll-error', buildIds.join(','));
        throw new TransientJobError('chaos: the build status could not be read');
      }
      return runner.describe(buildIds);
    },
    ...(runner.findBuild ? { findBuild: runner.findBuild.bind(runner) } : {}),
  };
}
