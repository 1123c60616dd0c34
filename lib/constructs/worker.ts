/**
 * A Lambda function fed by one QueueWithDlq, with the defaults every function of the platform shares.
 *
 * Default settings (the caller's `functionProps` win over each of them):
 * - Node.js 24 runtime (the newest in aws-cdk-lib), ARM64, active X-Ray tracing, 512 MB.
 * - esbuild bundling on this machine (never Docker), target node22 (the oldest runtime we support),
 *   minified, with source maps enabled at run time; `@aws-sdk/*` and `@smithy/*` are external (the runtime ships them).
 * - An explicit log group (one month, not `logRetention`, which deploys an extra Lambda).
 * - Its own role, holding only what it is granted: writing to its log group, X-Ray, consuming its
 *   queue and sending to its DLQ (permanent failures are moved there by the handler).
 * - Event source mapping: ReportBatchItemFailures, batch size and MaximumConcurrency from the
 *   queue's consumer settings, EVENT_COUNT metrics. No `retryAttempts`: SQS redrive owns retries.
 * - Alarms on errors and throttles (more than 0 in 5 minutes by default).
 */
import { RemovalPolicy } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { ENV } from '../../contract/runtime-env';
import { acknowledgeWildcard } from '../nag';
import { ALARM_PERIOD, alarmAbove } from './alarms';
import { SettingsProblems } from './settings-problems';
import type { QueueWithDlq } from './queue-with-dlq';

export type WorkerAlarm = 'errors' | 'throttles';
type OwnedFunctionProp = 'entry' | 'timeout' | 'role' | 'logGroup';

export interface WorkerProps {
  /** Absolute path of the handler entry file (exports `handler`). */
  readonly entry: string;
  /** The queue this worker consumes; its consumer settings give the timeout, batch size and concurrency. */
  readonly queue: QueueWithDlq;
  /** @default 512 */
  readonly memorySize?: number;
  readonly environment?: Readonly<Record<string, string>>;
  /** Where every alarm of this construct notifies. */
  readonly alarmAction: cloudwatch.IAlarmAction;
  /** Alarm when the metric's 5-minute sum is above the threshold. @default 0 for each */
  readonly alarmThresholds?: Partial<Record<WorkerAlarm, number>>;
  /** @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
  /**
   * Anything else of NodejsFunctionProps; wins over our defaults. The entry, timeout (from the
   * queue), role and log group belong to this construct.
   */
  readonly functionProps?: Omit<nodejs.NodejsFunctionProps, OwnedFunctionProp>;
}

/**
 * Stays out of every bundle: the Lambda runtime provides AWS SDK v3 and its Smithy packages (the
 * same list the `sdkV3ExcludeSmithyPackages` feature flag gives, which an explicit list replaces).
 */
const EXTERNAL_MODULES = ['@aws-sdk/*', '@smithy/*'];

const DEFAULT_MEMORY_MB = 512;
/** What Lambda accepts; CloudFormation would only refuse it at deploy. */
const MAX_TIMEOUT_SECONDS = 900;
const MEMORY_MB = { min: 128, max: 10_240 } as const;

export class Worker extends Construct {
  readonly function: nodejs.NodejsFunction;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;
  readonly alarms: Readonly<Record<WorkerAlarm, cloudwatch.Alarm>>;

  constructor(scope: Construct, id: string, props: WorkerProps) {
    super(scope, id);
    const { queue } = props;
    const caller = props.functionProps ?? {};
    validate(this.node.path, queue.consumer.timeout.toSeconds(), caller.memorySize ?? props.memorySize ?? DEFAULT_MEMORY_MB);
    this.logGroup = new logs.LogGroup(this, 'LogGroup', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Execution role of ${this.node.path}`,
    });
    // Scoped to this function's log group instead of AWSLambdaBasicExecutionRole's logs:* on *.
    this.logGroup.grantWrite(this.role);
    acknowledgeWildcard(this.role, 'Resource::*', 'Active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions.');

    const defaults: nodejs.NodejsFunctionProps = {
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: DEFAULT_MEMORY_MB,
      tracing: lambda.Tracing.ACTIVE,
      bundling: {
        minify: true,
        sourceMap: true,
        target: 'node22',
        externalModules: EXTERNAL_MODULES,
        forceDockerBundling: false,
      },
    };
    this.function = new nodejs.NodejsFunction(this, 'Function', {
      ...defaults,
      ...(props.memorySize === undefined ? {} : { memorySize: props.memorySize }),
      ...caller,
      bundling: { ...defaults.bundling, ...caller.bundling },
      entry: props.entry,
      timeout: queue.consumer.timeout,
      role: this.role,
      logGroup: this.logGroup,
      environment: {
        NODE_OPTIONS: '--enable-source-maps',
        [ENV.dlqUrl]: queue.deadLetterQueue.queueUrl,
        ...props.environment,
        ...caller.environment,
      },
    });
    queue.deadLetterQueue.grantSendMessages(this.function);

    this.function.addEventSource(
      new SqsEventSource(queue.queue, {
        batchSize: queue.consumer.batchSize,
        maxConcurrency: queue.consumer.maxConcurrency,
        reportBatchItemFailures: true,
        metricsConfig: { metrics: [lambda.MetricType.EVENT_COUNT] },
      }),
    );
    const thresholds = { errors: 0, throttles: 0, ...props.alarmThresholds };
    const metricOptions = { period: ALARM_PERIOD, statistic: cloudwatch.Stats.SUM };
    this.alarms = {
      errors: alarmAbove(this, 'ErrorsAlarm', {
        metric: this.function.metricErrors(metricOptions),
        threshold: thresholds.errors,
        description: `${this.node.path}: the function failed (an invocation error, not a reported batch item failure)`,
        action: props.alarmAction,
      }),
      throttles: alarmAbove(this, 'ThrottlesAlarm', {
        metric: this.function.metricThrottles(metricOptions),
        threshold: thresholds.throttles,
        description: `${this.node.path}: invocations were throttled (account concurrency exhausted)`,
        action: props.alarmAction,
      }),
    };
  }

  /** Grants `actions` on exactly `resources` to this worker's role. */
  allow(actions: string[], resources: string[]): void {
    this.role.addToPrincipalPolicy(new iam.PolicyStatement({ actions, resources }));
  }
}

function validate(path: string, timeoutSeconds: number, memoryMb: number): void {
  const problems = new SettingsProblems();
  problems.check('timeout', timeoutSeconds, (v) => v < 1 || v > MAX_TIMEOUT_SECONDS, `must be 1..${MAX_TIMEOUT_SECONDS} seconds (the Lambda maximum)`);
  problems.check('memorySize', memoryMb, (v) => v < MEMORY_MB.min || v > MEMORY_MB.max, `must be ${MEMORY_MB.min}..${MEMORY_MB.max} MB (what Lambda accepts)`);
  problems.throwIfAny(path);
}
