/**
 * The build reconciler: a function on a schedule that completes command-stage jobs whose build's
 * completion event never came (CodeBuild delivers events on a best-effort basis) and reports
 * verdicts a crashed reporter left unreported (src/core/build-reconciler.ts).
 *
 * Default settings:
 * - An EventBridge schedule every `settings.everyMinutes`; a failed run is not retried by
 *   EventBridge (retryAttempts 0): the next scheduled run does the same work.
 * - The Worker defaults (runtime, log group, own role, errors and throttles alarms), no queue.
 * - An alarm on the age of the oldest overdue job (the metric each run publishes), missing data
 *   breaching: it fires when jobs stay overdue and when the reconciler stops running.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import { Construct } from 'constructs';
import type { ReconcilerSettings } from '../../contract/job-types';
import { JOB_METRICS, METRICS_NAMESPACE, METRICS_SERVICE } from '../../contract/runtime-env';
import { Worker } from './worker';

export interface BuildReconcilerProps {
  /** Absolute path of the handler entry file. */
  readonly entry: string;
  readonly settings: ReconcilerSettings;
  readonly alarmAction: cloudwatch.IAlarmAction;
  readonly environment?: Readonly<Record<string, string>>;
}

/** Scheduled runs over which the overdue alarm looks for its metric (so one late run does not alarm). */
const ALARM_RUNS = 3;

export class BuildReconciler extends Construct {
  readonly worker: Worker;
  readonly schedule: events.Rule;
  readonly overdueAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: BuildReconcilerProps) {
    super(scope, id);
    const { settings } = props;
    this.worker = new Worker(this, 'Worker', {
      entry: props.entry,
      timeout: Duration.seconds(settings.timeoutSeconds),
      memorySize: settings.memoryMb,
      alarmAction: props.alarmAction,
      environment: props.environment,
    });
    this.schedule = new events.Rule(this, 'Schedule', {
      description: 'agent-jobs: run the build reconciler',
      schedule: events.Schedule.rate(Duration.minutes(settings.everyMinutes)),
      targets: [new targets.LambdaFunction(this.worker.function, { retryAttempts: 0 })],
    });
    const metric = new cloudwatch.Metric({
      namespace: METRICS_NAMESPACE,
      metricName: JOB_METRICS.oldestOverdueBuild,
      dimensionsMap: { service: METRICS_SERVICE },
      statistic: cloudwatch.Stats.MAXIMUM,
      period: Duration.minutes(settings.everyMinutes * ALARM_RUNS),
    });
    this.overdueAlarm = new cloudwatch.Alarm(this, 'OverdueAlarm', {
      metric,
      threshold: settings.overdueAlarmSeconds,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
      alarmDescription:
        `${this.node.path}: a command-stage job has had no verdict for more than ${Duration.seconds(settings.overdueAlarmSeconds).toHumanString()} past its build's timeout, ` +
        `or the reconciler has not run for ${settings.everyMinutes * ALARM_RUNS} minutes. Check the reconciler's log group and errors, then CodeBuild for the build (agent-jobs status <jobId> names it).`,
    });
    this.overdueAlarm.addAlarmAction(props.alarmAction);
  }
}
