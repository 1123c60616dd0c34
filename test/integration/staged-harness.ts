/**
 * Test harness for the stage handlers on the local emulators: the pipeline deps over dynalite and
 * fauxqs (zero back-off, controllable clock, recorded events), what the sequencer leaves behind
 * for a staged job, and one event-source-mapping delivery (receive, invoke, delete if acknowledged).
 */
import { randomUUID } from 'node:crypto';
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type Message,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSRecord } from 'aws-lambda';
import { JOB_TYPES, type StagedJobType } from '../../contract/job-types';
import { localPipelineDeps, type LocalWorkerOptions } from '../../src/compose/local';
import { jobAttributes, jobDigest, type JobEnvelope, type StageMessage } from '../../src/core/envelope';
import type { PipelineDeps } from '../../src/core/pipeline';
import { requiredTypes } from '../../src/core/requirements';
import { LOCAL_REGION } from '../../tools/local/emulators';
import { toSqsRecord } from '../../tools/local/poller';
import type { LocalEmulators } from '../support/emulators';
import type { Clock, JobLogger, Ledger } from '../../src/core/ports';

export const quietLogger: JobLogger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

export interface RecordedEvent {
  readonly type: string;
  readonly detail: Record<string, unknown>;
}

export interface StageHarness {
  readonly deps: PipelineDeps;
  readonly ledger: Ledger;
  readonly events: RecordedEvent[];
  /** The clock the pipeline reads (epoch ms); tests move it to let a lease expire. */
  now: number;
  /**
   * Records the job FORWARDED with its pin at the workspace's next turn (as the sequencer does) and
   * sends it to the stage queue; before it, a passed job of each type the stage requires at its
   * commit (catalog `requires`), unless `requirementsPassed` is false.
   */
  forward(message: StageMessage, options?: { readonly requirementsPassed?: boolean }): Promise<void>;
  /** Sends a raw body to the stage queue (duplicates, wrong types). */
  sendRaw(body: string): Promise<void>;
  /** One receive and invocation; resolves whether the record was reported as failed. */
  deliver(
    invoke: (records: SQSRecord[]) => Promise<SQSBatchResponse>,
  ): Promise<{ failed: boolean; receiveCount: number }>;
  /**
   * Lets `ms` pass for the pipeline's clock and for SQS: the records reported as failed become
   * visible again, whatever back-off the pipeline gave them (e.g. until a held lease ends).
   */
  elapse(ms: number): Promise<void>;
  /** Messages currently on the stage queue's DLQ. */
  dlqMessages(): Promise<Message[]>;
}

export const LEASE_SECONDS = 300;

/**
 * Options of a worker over the emulators (src/compose/local.ts). Zero back-off: a record
 * reported as failed is the next receive, so no test waits for a visibility timeout.
 */
export function emulatorWorkerOptions(
  emulators: LocalEmulators,
  options: { events: RecordedEvent[]; clock: Clock },
): LocalWorkerOptions {
  return {
    resources: emulators,
    events: { publish: async (type, detail) => void options.events.push({ type, detail }) },
    logger: quietLogger,
    metrics: { count: () => undefined },
    clock: options.clock,
    leaseSeconds: LEASE_SECONDS,
    backoff: { baseSeconds: 0, capSeconds: 0 },
  };
}

export function stageHarness(emulators: LocalEmulators, worker: StagedJobType): StageHarness {
  const { clients, queueUrls, dlqUrls } = emulators;
  const queue = JOB_TYPES[worker].stage.queue;
  const queueUrl = queueUrls[queue]!;
  const events: RecordedEvent[] = [];
  /** Receipt handles of records reported as failed, still invisible for their back-off. */
  const leftInFlight: string[] = [];
  const deps = localPipelineDeps(
    worker,
    emulatorWorkerOptions(emulators, { events, clock: { now: () => harness.now } }),
  );
  const { ledger } = deps;
  const harness: StageHarness = {
    ledger,
    events,
    now: Date.parse('2026-11-29T12:00:00Z'),
    deps,
    async forward(message, options = {}) {
      // What the catalog requires of the stage (open_pr: run_tests) passed before it at its commit.
      for (const type of options.requirementsPassed === false ? [] : requiredTypes(message.type)) {
        const required = { ...message, jobId: `${message.jobId}.${type}`, type, payload: {} } as StageMessage;
        await pinAt(required);
        const owner = randomUUID();
        await ledger.claim({
          job: stripPin(required),
          digest: jobDigest(stripPin(required)),
          owner,
          now: harness.now,
          leaseMs: 60_000,
          consumer: 'stage',
          pin: message.pin,
        });
        await ledger.complete({
          jobId: required.jobId,
          owner,
          now: harness.now,
          verdict: {
            status: 'SUCCEEDED',
            result: { verdict: 'passed', summary: `${type} passed`, sha: message.pin.sha },
          },
        });
      }
      await pinAt(message);
      await send(JSON.stringify(message), jobAttributes(message));
    },
    sendRaw: (body) => send(body, {}),
    deliver: (invoke) => deliverOne(emulators, queue, invoke, leftInFlight),
    async elapse(ms) {
      harness.now += ms;
      for (const handle of leftInFlight.splice(0)) {
        await clients.sqs
          .send(new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: handle, VisibilityTimeout: 0 }))
          .catch(() => undefined);
      }
    },
    async dlqMessages() {
      const out = await clients.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: dlqUrls[queue],
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          MessageAttributeNames: ['All'],
        }),
      );
      return out.Messages ?? [];
    },
  };

  /** Records the job FORWARDED with its pin at the workspace's next turn, as the sequencer does. */
  async function pinAt(message: StageMessage): Promise<void> {
    const envelope = stripPin(message);
    const owner = randomUUID();
    const seq = await ledger.nextWorkspaceSeq(message.workspaceId, harness.now);
    await ledger.claim({
      job: envelope,
      digest: jobDigest(envelope),
      owner,
      now: harness.now,
      leaseMs: 60_000,
      consumer: 'sequencer',
    });
    await ledger.complete({
      jobId: message.jobId,
      owner,
      now: harness.now,
      verdict: { status: 'FORWARDED', pin: message.pin },
      workspace: { workspaceId: message.workspaceId, seq },
    });
  }

  async function send(body: string, attributes: Record<string, string>): Promise<void> {
    const messageAttributes = Object.fromEntries(
      Object.entries(attributes).map(([k, v]) => [k, { DataType: 'String', StringValue: v }]),
    );
    await clients.sqs.send(
      new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body, MessageAttributes: messageAttributes }),
    );
  }

  return harness;
}

function stripPin(message: StageMessage): JobEnvelope {
  const { pin: _pin, ...envelope } = message;
  return envelope as JobEnvelope;
}

/**
 * One event-source-mapping delivery from a queue of the emulators: receive one message, invoke,
 * delete it when acknowledged. Resolves whether it was reported as failed; a failed message's
 * receipt handle goes to `leftInFlight` (so a harness can make it visible again when time passes).
 */
export async function deliverOne(
  emulators: LocalEmulators,
  queue: string,
  invoke: (records: SQSRecord[]) => Promise<SQSBatchResponse>,
  leftInFlight: string[] = [],
): Promise<{ failed: boolean; receiveCount: number }> {
  const { sqs } = emulators.clients;
  const queueUrl = emulators.queueUrls[queue]!;
  const out = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 1,
      WaitTimeSeconds: 1,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    }),
  );
  const message = out.Messages?.[0];
  if (!message) throw new Error(`no message on ${queue} to deliver`);
  const arn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] })))
    .Attributes!.QueueArn!;
  const record = toSqsRecord(message, arn, LOCAL_REGION);
  const response = await invoke([record]);
  const failed = response.batchItemFailures.some((f) => f.itemIdentifier === record.messageId);
  if (!failed) await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }));
  else leftInFlight.push(message.ReceiptHandle ?? '');
  return { failed, receiveCount: Number(record.attributes.ApproximateReceiveCount) };
}
