/**
 * QueueOps on SQS: DLQ moves with the reason, visibility back-off and heartbeats, forwarding to a
 * stage queue. The source queue URL is resolved from the record's eventSourceARN with GetQueueUrl
 * (once per queue), so it works the same on AWS, LocalStack and fauxqs.
 */
import { createHash } from 'node:crypto';
import { ChangeMessageVisibilityCommand, GetQueueUrlCommand, SendMessageCommand, type MessageAttributeValue, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { DLQ_ATTRIBUTES, stringAttributes } from '../../contract/messages';
import type { JobFailure, QueueOps } from '../core/ports';

/** SQS allows 256 KB of attributes; the reason is for triage, the details are in the ledger. */
const MAX_ERROR_MESSAGE_CHARS = 1_000;

export interface SqsQueueOpsOptions {
  readonly client: SQSClient;
  /** The DLQ of the queue this consumer reads. */
  readonly dlqUrl: string;
}

/** The record's own attributes as SendMessage wants them (event-source records use lower-case keys). */
function copiedAttributes(record: SQSRecord): Record<string, MessageAttributeValue> {
  return Object.fromEntries(
    Object.entries(record.messageAttributes).map(([name, a]) => [
      name,
      a.stringValue !== undefined ? { DataType: a.dataType, StringValue: a.stringValue } : { DataType: a.dataType, BinaryValue: Buffer.from(a.binaryValue ?? '', 'base64') },
    ]),
  );
}

/** FIFO DLQ dedup id derived from the original, so a repeated move of one delivery stays one message. */
export function dlqDeduplicationId(record: SQSRecord): string {
  return createHash('sha256').update(`${record.attributes.MessageDeduplicationId ?? record.messageId}:dlq`).digest('hex');
}

export class SqsQueueOps implements QueueOps {
  private readonly client: SQSClient;
  private readonly dlqUrl: string;
  private readonly queueUrls = new Map<string, Promise<string>>();

  constructor(options: SqsQueueOpsOptions) {
    this.client = options.client;
    this.dlqUrl = options.dlqUrl;
  }

  async moveToDlq(record: SQSRecord, failure: JobFailure): Promise<void> {
    const groupId = record.attributes.MessageGroupId;
    await this.client.send(
      new SendMessageCommand({
        QueueUrl: this.dlqUrl,
        MessageBody: record.body,
        MessageAttributes: {
          ...copiedAttributes(record),
          ...stringAttributes({
            [DLQ_ATTRIBUTES.reason]: failure.reason,
            [DLQ_ATTRIBUTES.errorMessage]: failure.message.slice(0, MAX_ERROR_MESSAGE_CHARS) || failure.reason,
          }),
        },
        ...(groupId !== undefined ? { MessageGroupId: groupId, MessageDeduplicationId: dlqDeduplicationId(record) } : {}),
      }),
    );
  }

  async changeVisibility(record: SQSRecord, seconds: number): Promise<void> {
    await this.client.send(
      new ChangeMessageVisibilityCommand({ QueueUrl: await this.sourceQueueUrl(record), ReceiptHandle: record.receiptHandle, VisibilityTimeout: seconds }),
    );
  }

  async send(queueUrl: string, body: string, attributes: Record<string, string>): Promise<void> {
    await this.client.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body, MessageAttributes: stringAttributes(attributes) }));
  }

  private sourceQueueUrl(record: SQSRecord): Promise<string> {
    const arn = record.eventSourceARN;
    let url = this.queueUrls.get(arn);
    if (url === undefined) {
      // arn:aws:sqs:<region>:<account>:<name>
      const [, , , , account, name] = arn.split(':');
      url = this.client.send(new GetQueueUrlCommand({ QueueName: name, QueueOwnerAWSAccountId: account })).then((out) => {
        if (!out.QueueUrl) throw new Error(`no queue URL for ${arn}`);
        return out.QueueUrl;
      });
      url.catch(() => this.queueUrls.delete(arn));
      this.queueUrls.set(arn, url);
    }
    return url;
  }
}
