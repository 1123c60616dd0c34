/**
 * A queue, its dead-letter queue and their alarms, with the platform's rules built in.
 *
 * Default settings:
 * - SQS-managed SSE on both queues: encryption at rest without a KMS key to administer, no KMS
 *   request per message (cost and throttling at FIFO high throughput), and producers in other
 *   roles need no key grant. A customer-managed key buys key-policy control we do not need: the
 *   queue policy already limits who reads.
 * - HTTPS-only queue policy, explicit 1 MiB maximum message size (CloudFormation's default is smaller).
 * - FIFO: high-throughput mode (deduplication per message group, throughput limit per group) and no
 *   content-based deduplication, because producers send explicit deduplication ids.
 * - Retention: 4 days on the queue, 14 days on the DLQ, longer than the queue's: a standard queue's
 *   message keeps its original enqueue time when SQS moves it to the DLQ.
 * - Retained when the stack is deleted (both queues hold jobs: the DLQ holds skipped jobs waiting
 *   for their replay); `removalPolicy` opts out, e.g. for a scratch environment.
 * - Alarms: oldest-message age on the queue; on the DLQ, visible messages > 0 and a message that
 *   has DLQ_AGE_ALARM_MARGIN_DAYS left before SQS deletes it (the depth alarm notifies once, and
 *   SQS deletes a message at the end of the retention, skipped jobs waiting for their replay
 *   included). The DLQ's ApproximateAgeOfOldestMessage counts from the move to the DLQ, but SQS
 *   deletes a standard queue's message by its first enqueue time (its days on the queue count
 *   against the DLQ retention) and a FIFO queue's by the move (the enqueue time resets): see
 *   dlqAgeAlarmSettings.
 *
 * The queue also carries the settings of its consumer (`consumer`), so every rule that ties the two
 * together (visibility vs. timeout, batch size on FIFO) is checked in one place, at synth.
 */
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { MAX_MESSAGE_BYTES } from '../../contract/runtime-env';
import { DLQ_RETENTION_DAYS, QUEUE_RETENTION_DAYS, VISIBILITY_TIMEOUT_FACTOR } from '../../contract/topology';
import { alarmAbove } from './alarms';
import { SettingsProblems } from './settings-problems';

/** How the queue's one consumer (a Lambda event source mapping) reads it. */
export interface QueueConsumerSettings {
  /** The consumer function's timeout. */
  readonly timeout: Duration;
  /** Records per batch: at most 10 (FIFO allows no more; a standard queue would need a batching window). */
  readonly batchSize: number;
  /** Event source mapping MaximumConcurrency, 2..1000. */
  readonly maxConcurrency: number;
}

export interface QueueWithDlqProps {
  /** @default false */
  readonly fifo?: boolean;
  readonly consumer: QueueConsumerSettings;
  /** @default VISIBILITY_TIMEOUT_FACTOR (6) x consumer.timeout */
  readonly visibilityTimeout?: Duration;
  /** Deliveries before SQS moves a message to the DLQ. @default 5 */
  readonly maxReceiveCount?: number;
  /** @default QUEUE_RETENTION_DAYS (4 days) */
  readonly retentionPeriod?: Duration;
  /** An existing DLQ. @default a new DLQ of the same kind as the queue, retention DLQ_RETENTION_DAYS (14 days) */
  readonly deadLetterQueue?: sqs.IQueue;
  /** Alarm when the oldest message is older than this. @default 15 minutes */
  readonly oldestMessageAlarmThreshold?: Duration;
  /** Where every alarm of this construct notifies. */
  readonly alarmAction: cloudwatch.IAlarmAction;
  /** Of both queues. @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
}

const MIN_MAX_RECEIVE_COUNT = 5;
const MAX_BATCH_SIZE = 10;
const MIN_CONCURRENCY = 2;
const MAX_CONCURRENCY = 1000;

export class QueueWithDlq extends Construct {
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.IQueue;
  readonly fifo: boolean;
  readonly consumer: QueueConsumerSettings;
  /** The queue's visibility timeout: its consumer's heartbeats extend a message to it. */
  readonly visibilityTimeout: Duration;
  readonly oldestMessageAlarm: cloudwatch.Alarm;
  /** Present when this construct created the DLQ (an imported DLQ is alarmed by its owner). */
  readonly dlqDepthAlarm?: cloudwatch.Alarm;
  /** Present when this construct created the DLQ: a message is halfway to being deleted. */
  readonly dlqAgeAlarm?: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: QueueWithDlqProps) {
    super(scope, id);
    this.fifo = props.fifo ?? false;
    this.consumer = props.consumer;
    const visibilityTimeout =
      props.visibilityTimeout ?? Duration.seconds(props.consumer.timeout.toSeconds() * VISIBILITY_TIMEOUT_FACTOR);
    this.visibilityTimeout = visibilityTimeout;
    const maxReceiveCount = props.maxReceiveCount ?? MIN_MAX_RECEIVE_COUNT;
    const retentionPeriod = props.retentionPeriod ?? Duration.days(QUEUE_RETENTION_DAYS);
    const dlqRetention = Duration.days(DLQ_RETENTION_DAYS);
    const oldestThreshold = props.oldestMessageAlarmThreshold ?? Duration.minutes(15);

    validate(this.node.path, {
      ...props,
      fifo: this.fifo,
      visibilityTimeout,
      maxReceiveCount,
      retentionPeriod,
      dlqRetention,
      oldestThreshold,
    });

    const common = {
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
      fifo: this.fifo ? true : undefined,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      maxMessageSizeBytes: MAX_MESSAGE_BYTES,
      ...(this.fifo
        ? {
            deduplicationScope: sqs.DeduplicationScope.MESSAGE_GROUP,
            fifoThroughputLimit: sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
            contentBasedDeduplication: false,
          }
        : {}),
    };
    if (props.deadLetterQueue) {
      this.deadLetterQueue = props.deadLetterQueue;
    } else {
      const dlq = new sqs.Queue(this, 'Dlq', { ...common, retentionPeriod: dlqRetention });
      this.deadLetterQueue = dlq;
      this.dlqDepthAlarm = alarmAbove(this, 'DlqDepthAlarm', {
        metric: dlq.metricApproximateNumberOfMessagesVisible({ statistic: cloudwatch.Stats.MAXIMUM }),
        threshold: 0,
        description: `${this.node.path}: messages are waiting in the dead-letter queue (triage with agent-jobs dlq list)`,
        action: props.alarmAction,
      });
      const age = dlqAgeAlarmSettings(this.fifo, retentionPeriod, dlqRetention);
      this.dlqAgeAlarm = alarmAbove(this, 'DlqAgeAlarm', {
        metric: dlq.metricApproximateAgeOfOldestMessage({ statistic: cloudwatch.Stats.MAXIMUM }),
        threshold: age.threshold.toSeconds(),
        description: `${this.node.path}: ${age.description} (redrive or drop it)`,
        action: props.alarmAction,
      });
    }
    this.queue = new sqs.Queue(this, 'Queue', {
      ...common,
      visibilityTimeout,
      retentionPeriod,
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount },
    });
    this.oldestMessageAlarm = alarmAbove(this, 'OldestMessageAlarm', {
      metric: this.queue.metricApproximateAgeOfOldestMessage({ statistic: cloudwatch.Stats.MAXIMUM }),
      threshold: oldestThreshold.toSeconds(),
      description: `${this.node.path}: a message has waited longer than ${oldestThreshold.toHumanString()} (stuck consumer or a failing FIFO group head)`,
      action: props.alarmAction,
    });
  }
}

/** Time an operator has to act on a DLQ message when its age alarm fires, before SQS deletes it. */
export const DLQ_AGE_ALARM_MARGIN_DAYS = 3;

/**
 * The DLQ age alarm's threshold (on ApproximateAgeOfOldestMessage, which counts from the move to
 * the DLQ) and words. SQS deletes a FIFO queue's dead letter `dlqRetention` after the move (the
 * enqueue time resets); a standard queue's `dlqRetention` after it was first sent to the queue (the
 * enqueue time is kept), so the time it spent there, up to the queue's retention, comes off.
 */
export function dlqAgeAlarmSettings(
  fifo: boolean,
  retention: Duration,
  dlqRetention: Duration,
): { threshold: Duration; description: string } {
  const margin = Duration.days(DLQ_AGE_ALARM_MARGIN_DAYS);
  const deletedAt = dlqRetention.toHumanString();
  if (fifo) {
    const threshold = Duration.seconds(dlqRetention.toSeconds() - margin.toSeconds());
    return {
      threshold,
      description: `a dead-letter message has been on the DLQ longer than ${threshold.toHumanString()}; SQS deletes it ${deletedAt} after it was moved there (a FIFO DLQ counts from the move), ${margin.toHumanString()} from now`,
    };
  }
  const threshold = Duration.seconds(dlqRetention.toSeconds() - retention.toSeconds() - margin.toSeconds());
  return {
    threshold,
    description:
      `a dead-letter message has been on the DLQ longer than ${threshold.toHumanString()}; SQS deletes a message ${deletedAt} after it was first sent to the queue: ` +
      `its time there (up to ${retention.toHumanString()}) counts, so it has at least ${margin.toHumanString()} left`,
  };
}

interface ResolvedSettings extends QueueWithDlqProps {
  readonly fifo: boolean;
  readonly visibilityTimeout: Duration;
  readonly maxReceiveCount: number;
  readonly retentionPeriod: Duration;
  readonly dlqRetention: Duration;
  readonly oldestThreshold: Duration;
}

function validate(path: string, s: ResolvedSettings): void {
  const problems = new SettingsProblems();
  const timeout = s.consumer.timeout.toSeconds();
  problems.check(
    'visibilityTimeout',
    s.visibilityTimeout.toSeconds(),
    (v) => v < timeout * VISIBILITY_TIMEOUT_FACTOR,
    `must be at least ${VISIBILITY_TIMEOUT_FACTOR} x the consumer timeout (${timeout} s), or a slow batch is redelivered while it still runs`,
  );
  problems.check(
    'maxReceiveCount',
    s.maxReceiveCount,
    (v) => v < MIN_MAX_RECEIVE_COUNT,
    `must be at least ${MIN_MAX_RECEIVE_COUNT}, or throttled deliveries land in the DLQ`,
  );
  problems.check(
    'consumer.batchSize',
    s.consumer.batchSize,
    (v) => v < 1 || v > MAX_BATCH_SIZE,
    s.fifo
      ? `must be 1..${MAX_BATCH_SIZE} on a FIFO queue`
      : `must be 1..${MAX_BATCH_SIZE} (larger batches need a batching window)`,
  );
  problems.check(
    'consumer.maxConcurrency',
    s.consumer.maxConcurrency,
    (v) => v < MIN_CONCURRENCY || v > MAX_CONCURRENCY,
    `must be ${MIN_CONCURRENCY}..${MAX_CONCURRENCY} (event source mapping MaximumConcurrency)`,
  );
  problems.check(
    'oldestMessageAlarmThreshold',
    s.oldestThreshold.toSeconds(),
    (v) => v <= 0 || v >= s.retentionPeriod.toSeconds(),
    `must be above 0 and below the retention period (${s.retentionPeriod.toSeconds()} s), or the alarm can never fire`,
  );
  if (!s.deadLetterQueue) {
    problems.check(
      'retentionPeriod',
      s.retentionPeriod.toSeconds(),
      (v) => v >= s.dlqRetention.toSeconds(),
      `must be shorter than the DLQ retention (${s.dlqRetention.toSeconds()} s): a standard queue's moved message keeps its original enqueue time`,
    );
    if (!s.fifo) {
      const margin = Duration.days(DLQ_AGE_ALARM_MARGIN_DAYS).toSeconds();
      problems.check(
        'retentionPeriod',
        s.retentionPeriod.toSeconds(),
        (v) => v > 0 && v < s.dlqRetention.toSeconds() && s.dlqRetention.toSeconds() - v - margin <= 0,
        `must leave the DLQ age alarm time to fire: at most the DLQ retention minus ${DLQ_AGE_ALARM_MARGIN_DAYS} days (${s.dlqRetention.toSeconds() - margin} s), since a moved message's time on the queue counts against it`,
      );
    }
  } else if (s.deadLetterQueue.fifo !== s.fifo) {
    problems.add(
      'deadLetterQueue',
      s.fifo
        ? 'must be a FIFO queue, because the queue is FIFO'
        : 'must be a standard queue, because the queue is standard',
    );
  }
  problems.throwIfAny(path);
}
