/**
 * The local stand-in for a Lambda SQS event source mapping: long-polls a queue, hands the handler
 * an SQSEvent in Lambda's shape, deletes the records that are not in batchItemFailures and leaves
 * the failed ones to their visibility timeout (which the handler may have changed for back-off).
 * At most `maxConcurrency` batches are in flight; a handler that throws leaves its whole batch.
 *
 * One receive loop feeds every batch: it receives again as soon as a batch is handed to the
 * handler, and waits only while `maxConcurrency` batches run. (One loop per concurrency slot, each
 * waiting for its own batch to finish, kept that many long polls open on an idle queue; fauxqs
 * wakes every waiting receive when a message arrives or a FIFO group unlocks, so all but one came
 * back empty, about a dozen wasted requests per job.)
 *
 * A stage queue is polled with `order: 'tenant'`: on AWS it is an SQS fair queue, and SQS serves a
 * quiet tenant ahead of a noisy tenant's backlog; fauxqs does not. So the poller receives ahead of
 * its free slots, holds up to `lookahead` messages (their visibility extended while they wait, so
 * none is delivered twice meanwhile) and fills each batch with the tenants in turn (tenant-turns.ts).
 * The FIFO queue keeps `order: 'arrival'`: one receive is one batch, as Lambda's.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type {
  Context,
  SQSBatchResponse,
  SQSEvent,
  SQSMessageAttributes,
  SQSRecord,
  SQSRecordAttributes,
} from 'aws-lambda';
import { VISIBILITY_TIMEOUT_FACTOR, type QueueRole } from '../../contract/topology';
import { deliveredGroupId } from '../../src/core/envelope';
import { errorMessage } from '../../src/core/errors';
import type { JobLogger } from '../../src/core/ports';
import { TenantTurns } from './tenant-turns';

/** What the handlers read from the Lambda context. */
export type InvocationContext = Pick<Context, 'getRemainingTimeInMillis' | 'awsRequestId' | 'functionName'>;
export type LocalHandler = (event: SQSEvent, context: InvocationContext) => Promise<SQSBatchResponse | void>;

export interface PollerOptions {
  /** Names the function in logs and in the context. */
  readonly name: string;
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  /** Goes into every record's eventSourceARN (adapters resolve the queue from it). */
  readonly queueArn: string;
  readonly region: string;
  readonly batchSize: number;
  readonly maxConcurrency: number;
  /** The function timeout: getRemainingTimeInMillis counts down from it. */
  readonly timeoutSeconds: number;
  readonly handler: LocalHandler;
  readonly logger: JobLogger;
  /** Long-poll wait, as the event source mapping does. @default 20 */
  readonly waitTimeSeconds?: number;
  /**
   * `arrival`: each receive is one batch (the FIFO queue, and any queue SQS orders). `tenant`: a
   * fair queue's stand-in, tenants served in turn (see the header). @default 'arrival'
   */
  readonly order?: 'arrival' | 'tenant';
  /** With `order: 'tenant'`: how many received messages may wait for a slot. @default DEFAULT_LOOKAHEAD */
  readonly lookahead?: number;
  /**
   * With `order: 'tenant'`: whose turn a record waits for. A constant serves everything received in
   * arrival order with the same look-ahead (the benchmark's baseline). @default tenantOf
   */
  readonly tenantOf?: (record: SQSRecord) => string;
  /** The queue's visibility timeout: waiting messages are kept invisible for it. @default timeoutSeconds x VISIBILITY_TIMEOUT_FACTOR */
  readonly visibilityTimeoutSeconds?: number;
}

/** How the local platform polls a queue of its topology: a stage queue stands in for an SQS fair queue. */
export function pollingOrder(role: QueueRole): NonNullable<PollerOptions['order']> {
  return role === 'stage' ? 'tenant' : 'arrival';
}

/**
 * Messages a tenant-ordered poller holds ahead of its slots: it can only put a quiet tenant first
 * among what it has received, so it looks far ahead (a burst larger than this is served in arrival
 * order beyond it). They are in flight for SQS (a standard queue allows 120,000).
 */
export const DEFAULT_LOOKAHEAD = 1_000;

export interface QueuePoller {
  /**
   * Aborts the pending receives and resolves when the batches in flight have finished (see
   * getRemainingTimeInMillis); a tenant-ordered poller makes the messages still waiting visible
   * again. A receive aborted after SQS took its messages leaves them invisible for a visibility
   * timeout: harmless for the local platform, whose queues die with it.
   */
  stop(): Promise<void>;
}

/** Pause after a failed receive, so an unreachable queue does not spin. */
const RECEIVE_RETRY_MS = 1_000;

export function startQueuePoller(options: PollerOptions): QueuePoller {
  const stopping = new AbortController();
  const inFlight = new Set<Promise<void>>();
  const receiving =
    options.order === 'tenant'
      ? tenantLoop(options, stopping.signal, inFlight)
      : receiveLoop(options, stopping.signal, inFlight);
  const stopped = receiving.then(async () => {
    while (inFlight.size > 0) await Promise.all(inFlight);
  });
  return {
    stop() {
      stopping.abort();
      return stopped;
    },
  };
}

type Receive = (maxMessages: number) => Promise<SQSRecord[] | undefined>;

/** One receive as the event source mapping makes it; undefined when it failed (logged, after a pause) or the poller stopped. */
function receiver(options: PollerOptions, signal: AbortSignal): Receive {
  const { sqs, queueUrl, logger } = options;
  return async (maxMessages) => {
    try {
      const response = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: maxMessages,
          WaitTimeSeconds: options.waitTimeSeconds ?? 20,
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
        { abortSignal: signal },
      );
      return (response.Messages ?? []).map((m) => toSqsRecord(m, options.queueArn, options.region));
    } catch (error) {
      if (signal.aborted) return undefined;
      logger.error('receive failed', { function: options.name, error: errorMessage(error) });
      await sleep(RECEIVE_RETRY_MS, undefined, { signal }).catch(() => undefined);
      return undefined;
    }
  };
}

function dispatch(
  options: PollerOptions,
  records: SQSRecord[],
  signal: AbortSignal,
  inFlight: Set<Promise<void>>,
  then?: () => void,
): void {
  const batch = invoke(options, records, signal).finally(() => {
    inFlight.delete(batch);
    then?.();
  });
  inFlight.add(batch);
}

async function receiveLoop(options: PollerOptions, signal: AbortSignal, inFlight: Set<Promise<void>>): Promise<void> {
  const receive = receiver(options, signal);
  while (!signal.aborted) {
    // A free slot first: Lambda runs at most MaximumConcurrency batches at once.
    while (inFlight.size >= options.maxConcurrency) await Promise.race(inFlight);
    const records = await receive(options.batchSize);
    // Received messages are always handled, even when stopping: their receive already counted.
    if (records?.length) dispatch(options, records, signal, inFlight);
  }
}

/**
 * Receives while fewer than `lookahead` messages wait, and hands batches out with the tenants in
 * turn whenever a slot is free. Stopping releases the messages still waiting (visibility 0).
 */
async function tenantLoop(options: PollerOptions, signal: AbortSignal, inFlight: Set<Promise<void>>): Promise<void> {
  const receive = receiver(options, signal);
  const lookahead = options.lookahead ?? DEFAULT_LOOKAHEAD;
  const waiting = new TenantTurns<SQSRecord>(options.tenantOf ?? tenantOf);
  const pump = (): void => {
    while (!signal.aborted && inFlight.size < options.maxConcurrency && waiting.size > 0)
      dispatch(options, waiting.take(options.batchSize), signal, inFlight, pump);
  };
  const visibility = options.visibilityTimeoutSeconds ?? options.timeoutSeconds * VISIBILITY_TIMEOUT_FACTOR;
  const keepInvisible = setInterval(
    () => void setVisibility(options, waiting.items(), visibility),
    (visibility * 1000) / 3,
  );
  keepInvisible.unref();
  try {
    while (!signal.aborted) {
      while (waiting.size >= lookahead && inFlight.size > 0) await Promise.race(inFlight);
      if (signal.aborted) break;
      const records = await receive(Math.min(MAX_RECEIVE, lookahead - waiting.size));
      if (records?.length) {
        waiting.add(records);
        pump();
      }
    }
  } finally {
    clearInterval(keepInvisible);
    await setVisibility(options, waiting.drain(), 0);
  }
}

/** A record's tenant: its fair-queue group; a message without one is a tenant of its own, as on an SQS fair queue. */
export function tenantOf(record: SQSRecord): string {
  return deliveredGroupId(record) ?? record.messageId;
}

/** SQS hands out at most 10 messages per receive. */
const MAX_RECEIVE = 10;

/** Sets the visibility of held messages (best effort: one that was not kept is delivered again, and the ledger sorts that out). */
async function setVisibility(options: PollerOptions, records: readonly SQSRecord[], seconds: number): Promise<void> {
  for (let i = 0; i < records.length; i += MAX_RECEIVE) {
    const chunk = records.slice(i, i + MAX_RECEIVE);
    await options.sqs
      .send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: options.queueUrl,
          Entries: chunk.map((r, n) => ({ Id: String(n), ReceiptHandle: r.receiptHandle, VisibilityTimeout: seconds })),
        }),
      )
      .catch((error: unknown) =>
        options.logger.warn('could not change the visibility of waiting messages', {
          function: options.name,
          error: errorMessage(error),
        }),
      );
  }
}

async function invoke(options: PollerOptions, records: SQSRecord[], stopping: AbortSignal): Promise<void> {
  const { logger, name } = options;
  const deadline = Date.now() + options.timeoutSeconds * 1_000;
  const context: InvocationContext = {
    functionName: name,
    awsRequestId: randomUUID(),
    // Once the platform is stopping, a handler that watches its remaining time sees none left and hands
    // its work to a later delivery, so shutdown does not wait for a whole test run.
    getRemainingTimeInMillis: () => (stopping.aborted ? 0 : Math.max(0, deadline - Date.now())),
  };
  let response: SQSBatchResponse | void;
  try {
    response = await options.handler({ Records: records }, context);
  } catch (error) {
    logger.error('handler threw: the whole batch is left for retry', {
      function: name,
      messageIds: records.map((r) => r.messageId),
      error: errorMessage(error),
    });
    return;
  }
  if (Date.now() > deadline)
    logger.warn('handler ran past its timeout (Lambda would have stopped it)', { function: name });
  const done = recordsToDelete(records, response);
  if (done === undefined) {
    logger.error('invalid batchItemFailures: the whole batch is left for retry', { function: name });
    return;
  }
  if (done.length === 0) return;
  try {
    const result = await options.sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: options.queueUrl,
        Entries: done.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle })),
      }),
    );
    if (result.Failed?.length)
      logger.warn('some processed messages could not be deleted and will be redelivered', {
        function: name,
        failed: result.Failed.length,
      });
  } catch (error) {
    logger.error('delete failed: processed messages will be redelivered', {
      function: name,
      error: errorMessage(error),
    });
  }
}

/**
 * The records the event source mapping deletes after an invocation. Like Lambda, an item
 * identifier that is empty or names no record of the batch fails the whole batch (undefined).
 */
export function recordsToDelete(
  records: readonly SQSRecord[],
  response: SQSBatchResponse | void,
): SQSRecord[] | undefined {
  const failures = response?.batchItemFailures ?? [];
  const ids = new Set(records.map((r) => r.messageId));
  if (failures.some((f) => !f.itemIdentifier || !ids.has(f.itemIdentifier))) return undefined;
  const failed = new Set(failures.map((f) => f.itemIdentifier));
  return records.filter((r) => !failed.has(r.messageId));
}

/** An SQS message as Lambda's event source mapping delivers it. */
export function toSqsRecord(message: Message, queueArn: string, region: string): SQSRecord {
  const system = message.Attributes ?? {};
  const attributes: SQSRecordAttributes = {
    ApproximateReceiveCount: system['ApproximateReceiveCount'] ?? '1',
    SentTimestamp: system['SentTimestamp'] ?? '',
    SenderId: system['SenderId'] ?? '',
    ApproximateFirstReceiveTimestamp: system['ApproximateFirstReceiveTimestamp'] ?? '',
    ...pick(system, [
      'SequenceNumber',
      'MessageGroupId',
      'MessageDeduplicationId',
      'DeadLetterQueueSourceArn',
      'AWSTraceHeader',
    ]),
  };
  const messageAttributes: SQSMessageAttributes = Object.fromEntries(
    Object.entries(message.MessageAttributes ?? {}).map(([name, value]) => [
      name,
      {
        dataType: value.DataType ?? 'String',
        ...(value.StringValue !== undefined ? { stringValue: value.StringValue } : {}),
        ...(value.BinaryValue !== undefined ? { binaryValue: Buffer.from(value.BinaryValue).toString('base64') } : {}),
        stringListValues: [],
        binaryListValues: [],
      },
    ]),
  );
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    attributes,
    messageAttributes,
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
}

function pick(source: Record<string, string>, keys: readonly string[]): Record<string, string> {
  return Object.fromEntries(keys.flatMap((key) => (source[key] === undefined ? [] : [[key, source[key]]])));
}
