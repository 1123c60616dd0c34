/**
 * QueueOps on SQS: DLQ moves with the reason, visibility back-off and heartbeats, forwarding to a
 * stage queue. The source queue URL is resolved from the record's eventSourceARN with GetQueueUrl
 * (once per queue), so it works the same on AWS, LocalStack and fauxqs.
 */
import { createHash } from 'node:crypto';
import {
  ChangeMessageVisibilityCommand,
  GetQueueUrlCommand,
  SendMessageCommand,
  type MessageAttributeValue,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { DEFERRAL_ATTRIBUTES, DLQ_ATTRIBUTES, attributeText, stringAttributes } from '../../contract/messages';
import { deliveredGroupId } from '../core/envelope';
import type { JobFailure, QueueOps } from '../core/ports';

/** SQS allows 256 KB of attributes; the reason is for triage, the details are in the ledger. */
const MAX_ERROR_MESSAGE_CHARS = 1_000;

export interface SqsQueueOpsOptions {
  readonly client: SQSClient;
  /** The DLQ of the queue this consumer reads (absent for a function that reads no queue). */
  readonly dlqUrl?: string;
}

const DEFERRAL_NAMES: ReadonlySet<string> = new Set(Object.values(DEFERRAL_ATTRIBUTES));

/**
 * The record's own attributes as SendMessage wants them (event-source records use lower-case
 * keys), without what its waits for limits carried: a copy on a DLQ starts afresh when redriven.
 */
function copiedAttributes(record: SQSRecord): Record<string, MessageAttributeValue> {
  return Object.fromEntries(
    Object.entries(record.messageAttributes)
      .filter(([name]) => !DEFERRAL_NAMES.has(name))
      .map(([name, a]) => [
        name,
        a.stringValue !== undefined
          ? { DataType: a.dataType, StringValue: a.stringValue }
          : { DataType: a.dataType, BinaryValue: Buffer.from(a.binaryValue ?? '', 'base64') },
      ]),
  );
}

/** The `reason` and `errorMessage` attributes of a message on a DLQ. */
function failureAttributes(failure: JobFailure): Record<string, MessageAttributeValue> {
  return stringAttributes({
    [DLQ_ATTRIBUTES.reason]: failure.reason,
    [DLQ_ATTRIBUTES.errorMessage]: attributeText(failure.message, MAX_ERROR_MESSAGE_CHARS) || failure.reason,
  });
}

/** FIFO DLQ dedup id derived from the original, so a repeated move of one delivery stays one message. */
export function dlqDeduplicationId(record: SQSRecord): string {
  return createHash('sha256')
    .update(`${record.attributes.MessageDeduplicationId ?? record.messageId}:dlq`)
    .digest('hex');
}

export class SqsQueueOps implements QueueOps {
  private readonly client: SQSClient;
  private readonly dlqUrl: string | undefined;
  private readonly queueUrls = new Map<string, Promise<string>>();

  constructor(options: SqsQueueOpsOptions) {
    this.client = options.client;
    this.dlqUrl = options.dlqUrl;
  }

  async moveToDlq(record: SQSRecord, failure: JobFailure): Promise<void> {
    // A FIFO DLQ needs the group and a deduplication id; a fair queue's DLQ keeps the tenant's group.
    const groupId = deliveredGroupId(record);
    const fifo = record.eventSourceARN.endsWith('.fifo');
    if (this.dlqUrl === undefined) throw new Error(`no DLQ configured to move message ${record.messageId} to`);
    await this.client.send(
      new SendMessageCommand({
        QueueUrl: this.dlqUrl,
        MessageBody: record.body,
        MessageAttributes: { ...copiedAttributes(record), ...failureAttributes(failure) },
        ...(groupId !== undefined ? { MessageGroupId: groupId } : {}),
        ...(groupId !== undefined && fifo ? { MessageDeduplicationId: dlqDeduplicationId(record) } : {}),
      }),
    );
  }

  async sendToDlq(
    dlqUrl: string,
    message: { body: string; attributes: Record<string, string>; groupId?: string },
    failure: JobFailure,
  ): Promise<void> {
    await this.client.send(
      new SendMessageCommand({
        QueueUrl: dlqUrl,
        MessageBody: message.body,
        MessageAttributes: { ...stringAttributes(message.attributes), ...failureAttributes(failure) },
        ...(message.groupId !== undefined ? { MessageGroupId: message.groupId } : {}),
      }),
    );
  }

  async changeVisibility(record: SQSRecord, seconds: number): Promise<void> {
    await this.client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: await this.sourceQueueUrl(record),
        ReceiptHandle: record.receiptHandle,
        VisibilityTimeout: seconds,
      }),
    );
  }

  async requeue(record: SQSRecord, delaySeconds: number, attributes: Record<string, string>): Promise<void> {
    const groupId = deliveredGroupId(record);
    if (record.eventSourceARN.endsWith('.fifo'))
      throw new Error(
        `message ${record.messageId} is on a FIFO queue: a copy would go behind its group's later messages`,
      );
    await this.client.send(
      new SendMessageCommand({
        QueueUrl: await this.sourceQueueUrl(record),
        MessageBody: record.body,
        MessageAttributes: { ...copiedAttributes(record), ...stringAttributes(attributes) },
        DelaySeconds: delaySeconds,
        // A fair queue's copy stays in its tenant's group.
        ...(groupId !== undefined ? { MessageGroupId: groupId } : {}),
      }),
    );
  }

  async send(queueUrl: string, body: string, attributes: Record<string, string>, groupId: string): Promise<void> {
    await this.client.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: body,
        MessageAttributes: stringAttributes(attributes),
        MessageGroupId: groupId,
      }),
    );
  }

  private sourceQueueUrl(record: SQSRecord): Promise<string> {
    const arn = record.eventSourceARN;
    let url = this.queueUrls.get(arn);
    if (url === undefined) {
      // arn:aws:sqs:<region>:<account>:<name>
      const [, , , , account, name] = arn.split(':');
      url = this.client
        .send(new GetQueueUrlCommand({ QueueName: name, QueueOwnerAWSAccountId: account }))
        .then((out) => {
          if (!out.QueueUrl) throw new Error(`no queue URL for ${arn}`);
          return out.QueueUrl;
        });
      url.catch(() => this.queueUrls.delete(arn));
      this.queueUrls.set(arn, url);
    }
    return url;
  }
}
