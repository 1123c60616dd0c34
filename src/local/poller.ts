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
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent, SQSMessageAttributes, SQSRecord, SQSRecordAttributes } from 'aws-lambda';
import { errorMessage } from '../core/errors';
import type { JobLogger } from '../core/ports';

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
}

export interface QueuePoller {
  /**
   * Aborts the pending receives and resolves when the batches in flight have finished (see
   * getRemainingTimeInMillis). A receive aborted after SQS took its messages leaves them invisible
   * for a visibility timeout: harmless for the local platform, whose queues die with it.
   */
  stop(): Promise<void>;
}

/** Pause after a failed receive, so an unreachable queue does not spin. */
const RECEIVE_RETRY_MS = 1_000;

export function startQueuePoller(options: PollerOptions): QueuePoller {
  const stopping = new AbortController();
  const inFlight = new Set<Promise<void>>();
  const receiving = receiveLoop(options, stopping.signal, inFlight);
  const stopped = receiving.then(() => Promise.all(inFlight)).then(() => undefined);
  return {
    stop() {
      stopping.abort();
      return stopped;
    },
  };
}

async function receiveLoop(options: PollerOptions, signal: AbortSignal, inFlight: Set<Promise<void>>): Promise<void> {
  const { sqs, queueUrl, logger } = options;
  while (!signal.aborted) {
    // A free slot first: Lambda runs at most MaximumConcurrency batches at once.
    while (inFlight.size >= options.maxConcurrency) await Promise.race(inFlight);
    let messages: Message[];
    try {
      const response = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: options.batchSize,
          WaitTimeSeconds: options.waitTimeSeconds ?? 20,
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
        { abortSignal: signal },
      );
      messages = response.Messages ?? [];
    } catch (error) {
      if (signal.aborted) return;
      logger.error('receive failed', { function: options.name, error: errorMessage(error) });
      await sleep(RECEIVE_RETRY_MS, undefined, { signal }).catch(() => undefined);
      continue;
    }
    // Received messages are always handled, even when stopping: their receive already counted.
    if (messages.length === 0) continue;
    const batch = invoke(options, messages.map((m) => toSqsRecord(m, options.queueArn, options.region)), signal).finally(() => inFlight.delete(batch));
    inFlight.add(batch);
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
    logger.error('handler threw: the whole batch is left for retry', { function: name, messageIds: records.map((r) => r.messageId), error: errorMessage(error) });
    return;
  }
  if (Date.now() > deadline) logger.warn('handler ran past its timeout (Lambda would have stopped it)', { function: name });
  const done = recordsToDelete(records, response);
  if (done === undefined) {
    logger.error('invalid batchItemFailures: the whole batch is left for retry', { function: name });
    return;
  }
  if (done.length === 0) return;
  try {
    const result = await options.sqs.send(
      new DeleteMessageBatchCommand({ QueueUrl: options.queueUrl, Entries: done.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle })) }),
    );
    if (result.Failed?.length) logger.warn('some processed messages could not be deleted and will be redelivered', { function: name, failed: result.Failed.length });
  } catch (error) {
    logger.error('delete failed: processed messages will be redelivered', { function: name, error: errorMessage(error) });
  }
}

/**
 * The records the event source mapping deletes after an invocation. Like Lambda, an item
 * identifier that is empty or names no record of the batch fails the whole batch (undefined).
 */
export function recordsToDelete(records: readonly SQSRecord[], response: SQSBatchResponse | void): SQSRecord[] | undefined {
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
    ...pick(system, ['SequenceNumber', 'MessageGroupId', 'MessageDeduplicationId', 'DeadLetterQueueSourceArn', 'AWSTraceHeader']),
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
