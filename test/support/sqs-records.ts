/**
 * SQS event records as the Lambda event source mapping delivers them, for unit tests of handlers
 * and batch planning (Prepare / Act / Assess without a queue).
 */
import { randomUUID } from 'node:crypto';
import type { SQSMessageAttributes, SQSRecord } from 'aws-lambda';
import { deduplicationId, jobAttributes, messageGroupId, type JobEnvelope } from '../../src/core/envelope';

export const TEST_QUEUE_ARN = 'arn:aws:sqs:us-east-1:000000000000:agent-jobs.fifo';

export interface RecordOptions {
  readonly messageGroupId?: string;
  readonly receiveCount?: number;
  readonly attributes?: Record<string, string>;
  readonly messageId?: string;
  readonly deduplicationId?: string;
}

export function stringAttributes(values: Record<string, string>): SQSMessageAttributes {
  return Object.fromEntries(
    Object.entries(values).map(([k, v]) => [
      k,
      { dataType: 'String', stringValue: v, stringListValues: [], binaryListValues: [] },
    ]),
  );
}

export function sqsRecordFactory(body: string, options: RecordOptions = {}): SQSRecord {
  const messageId = options.messageId ?? randomUUID();
  return {
    messageId,
    receiptHandle: `receipt-${messageId}`,
    body,
    attributes: {
      ApproximateReceiveCount: String(options.receiveCount ?? 1),
      SentTimestamp: '1700000000000',
      SenderId: 'test',
      ApproximateFirstReceiveTimestamp: '1700000000000',
      ...(options.messageGroupId !== undefined
        ? { MessageGroupId: options.messageGroupId, MessageDeduplicationId: options.deduplicationId ?? messageId }
        : {}),
    },
    messageAttributes: stringAttributes(options.attributes ?? {}),
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: TEST_QUEUE_ARN,
    awsRegion: 'us-east-1',
  };
}

/** A job as the producer sends it to the FIFO queue: group, dedup id and attributes set. */
export function jobRecord(
  job: JobEnvelope,
  options: Omit<RecordOptions, 'messageGroupId' | 'deduplicationId'> = {},
): SQSRecord {
  return sqsRecordFactory(JSON.stringify(job), {
    ...options,
    messageGroupId: messageGroupId(job.workspaceId),
    deduplicationId: deduplicationId(job.jobId, job.type),
    attributes: { ...jobAttributes(job), ...options.attributes },
  });
}
