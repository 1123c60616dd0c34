/**
 * Drives a handler the way the Lambda event source mapping does: receive a batch (up to 10) from a
 * queue, hand it over as an SQSEvent, delete the records the handler acknowledged and leave the
 * reported failures for SQS to redeliver.
 */
import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord, SQSRecordAttributes } from 'aws-lambda';

export type BatchHandler = (event: SQSEvent) => Promise<SQSBatchResponse>;

export async function queueArn(sqs: SQSClient, queueUrl: string): Promise<string> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
  );
  if (!Attributes?.QueueArn) throw new Error(`no QueueArn for ${queueUrl}`);
  return Attributes.QueueArn;
}

/** A received message as the event source mapping shapes it. */
export function toSqsRecord(message: Message, arn: string): SQSRecord {
  const system = message.Attributes ?? {};
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    attributes: system as unknown as SQSRecordAttributes,
    messageAttributes: Object.fromEntries(
      Object.entries(message.MessageAttributes ?? {}).map(([name, a]) => [
        name,
        { dataType: a.DataType ?? 'String', stringValue: a.StringValue, stringListValues: [], binaryListValues: [] },
      ]),
    ),
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: arn,
    awsRegion: arn.split(':')[3] ?? 'us-east-1',
  };
}

export async function receive(sqs: SQSClient, queueUrl: string, max = 10): Promise<Message[]> {
  const { Messages } = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: max,
      WaitTimeSeconds: 0,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    }),
  );
  return Messages ?? [];
}

/** Hands one received batch to the handler and deletes what it acknowledged. */
export async function deliver(
  sqs: SQSClient,
  queueUrl: string,
  arn: string,
  messages: readonly Message[],
  handler: BatchHandler,
): Promise<SQSBatchResponse> {
  const records = messages.map((m) => toSqsRecord(m, arn));
  const response = await handler({ Records: records });
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  for (const record of records) {
    if (!failed.has(record.messageId))
      await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: record.receiptHandle }));
  }
  return response;
}

export interface DriveOptions {
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  readonly handler: BatchHandler;
  /** @default 10 (the FIFO maximum) */
  readonly batchSize?: number;
  /** Pollers running side by side (the mapping's MaximumConcurrency). @default 1 */
  readonly concurrency?: number;
  /** Guard against a handler that never drains the queue. @default 200 */
  readonly maxBatches?: number;
}

/**
 * Polls until a receive comes back empty. Failures must become visible again at once for this
 * to finish (tests set the back-off to zero); then every message ends deleted or on a DLQ.
 */
export async function driveQueue(options: DriveOptions): Promise<{ batches: number; responses: SQSBatchResponse[] }> {
  const arn = await queueArn(options.sqs, options.queueUrl);
  const responses: SQSBatchResponse[] = [];
  const maxBatches = options.maxBatches ?? 200;
  const poll = async () => {
    for (;;) {
      const messages = await receive(options.sqs, options.queueUrl, options.batchSize ?? 10);
      if (messages.length === 0) return;
      if (responses.length >= maxBatches) throw new Error(`queue not drained after ${maxBatches} batches`);
      responses.push(await deliver(options.sqs, options.queueUrl, arn, messages, options.handler));
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 1 }, poll));
  return { batches: responses.length, responses };
}

/** Every message of a queue (e.g. a DLQ), read and deleted, in receive order. */
export async function drain(sqs: SQSClient, queueUrl: string): Promise<Message[]> {
  const all: Message[] = [];
  for (let batch = await receive(sqs, queueUrl); batch.length > 0; batch = await receive(sqs, queueUrl)) {
    for (const message of batch) {
      all.push(message);
      await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }));
    }
  }
  return all;
}
