/**
 * The construct library on its own: synth-time validation of QueueWithDlq (one error naming every
 * offending setting), and Worker defaults versus caller props.
 */
import { App, Duration, Stack, Token } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { join } from 'node:path';
import { InvalidSettingsError } from '../../lib/constructs/settings-problems';
import { QueueWithDlq, type QueueWithDlqProps } from '../../lib/constructs/queue-with-dlq';
import { LAMBDA_NODE_MAJOR, Worker } from '../../lib/constructs/worker';
import { ROOT } from './helpers';

/** An alarm action that goes nowhere: these tests look at queues and functions, not notifications. */
const alarmAction: cloudwatch.IAlarmAction = {
  bind: () => ({ alarmActionArn: 'arn:aws:sns:eu-west-1:123456789012:alarms' }),
};
const consumer = { timeout: Duration.seconds(60), batchSize: 10, maxConcurrency: 5 };

function newStack(): Stack {
  return new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Test');
}
function queueWith(props: Partial<QueueWithDlqProps>, stack = newStack()): QueueWithDlq {
  return new QueueWithDlq(stack, 'Lane', { consumer, alarmAction, ...props });
}

describe('QueueWithDlq validation', () => {
  it('accepts the defaults and derives visibility as 6 x the consumer timeout', () => {
    const lane = queueWith({ fifo: true });
    Template.fromStack(Stack.of(lane)).hasResourceProperties('AWS::SQS::Queue', {
      VisibilityTimeout: 360,
      RedrivePolicy: Match.objectLike({ maxReceiveCount: 5 }),
    });
  });

  it('names every offending setting in one error', () => {
    const create = () =>
      queueWith({
        fifo: true,
        visibilityTimeout: Duration.seconds(300),
        maxReceiveCount: 2,
        consumer: { timeout: Duration.seconds(60), batchSize: 20, maxConcurrency: 1 },
      });
    expect(create).toThrow(InvalidSettingsError);
    expect(create).toThrow(/Lane has invalid settings/);
    expect(create).toThrow(/visibilityTimeout = 300: must be at least 6 x the consumer timeout \(60 s\)/);
    expect(create).toThrow(/maxReceiveCount = 2: must be at least 5/);
    expect(create).toThrow(/consumer\.batchSize = 20: must be 1\.\.10 on a FIFO queue/);
    expect(create).toThrow(/consumer\.maxConcurrency = 1: must be 2\.\.1000/);
  });

  it('rejects a standard DLQ on a FIFO queue and a FIFO DLQ on a standard queue', () => {
    const withDlq = (fifo: boolean, dlqFifo: boolean) => {
      const stack = newStack();
      return () =>
        queueWith({ fifo, deadLetterQueue: new sqs.Queue(stack, 'Dlq', { fifo: dlqFifo || undefined }) }, stack);
    };
    expect(withDlq(true, false)).toThrow(/deadLetterQueue: must be a FIFO queue, because the queue is FIFO/);
    expect(withDlq(false, true)).toThrow(/deadLetterQueue: must be a standard queue/);
    expect(withDlq(true, true)).not.toThrow();
  });

  it('rejects a batch size over 10 on a standard queue, concurrency over 1000, an alarm threshold beyond retention, retention beyond the DLQ', () => {
    const create = () =>
      queueWith({
        consumer: { timeout: Duration.seconds(60), batchSize: 11, maxConcurrency: 1001 },
        retentionPeriod: Duration.days(14),
        oldestMessageAlarmThreshold: Duration.days(14),
      });
    expect(create).toThrow(/consumer\.batchSize = 11: must be 1\.\.10 \(larger batches need a batching window\)/);
    expect(create).toThrow(/consumer\.maxConcurrency = 1001/);
    expect(create).toThrow(/oldestMessageAlarmThreshold = 1209600: must be above 0 and below the retention period/);
    expect(create).toThrow(/retentionPeriod = 1209600: must be shorter than the DLQ retention/);
  });

  it('rejects a standard queue retention that leaves its DLQ age alarm no time to fire (its time on the queue counts against the DLQ)', () => {
    expect(() => queueWith({ retentionPeriod: Duration.days(11) })).toThrow(
      /retentionPeriod = 950400: must leave the DLQ age alarm time to fire/,
    );
    expect(() => queueWith({ fifo: true, retentionPeriod: Duration.days(11) })).not.toThrow();
  });

  it('skips values that are unresolved tokens (known only at deploy)', () => {
    expect(() => queueWith({ maxReceiveCount: Token.asNumber({ Ref: 'MaxReceiveCount' }) })).not.toThrow();
  });
});

describe('Worker', () => {
  it('applies the shared defaults and lets the caller override them', () => {
    const stack = newStack();
    const queue = queueWith({}, stack);
    new Worker(stack, 'Worker', {
      entry: join(ROOT, 'src/handlers/open-pr.ts'),
      queue,
      alarmAction,
      memorySize: 256,
      functionProps: { description: 'caller wins', architecture: undefined, tracing: undefined },
    });
    const template = Template.fromStack(stack);
    template.hasResourceProperties('AWS::Lambda::Function', {
      Runtime: `nodejs${LAMBDA_NODE_MAJOR}.x`,
      Timeout: 60,
      MemorySize: 256,
      Description: 'caller wins',
      Architectures: Match.absent(),
      TracingConfig: Match.absent(),
      LoggingConfig: { LogGroup: Match.anyValue() },
    });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      BatchSize: 10,
      ScalingConfig: { MaximumConcurrency: 5 },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
    expect(JSON.stringify(template.findResources('AWS::Lambda::Function'))).not.toContain('MaximumRetryAttempts');
  });
});
