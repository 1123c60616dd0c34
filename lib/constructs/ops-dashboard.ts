/**
 * The platform's CloudWatch dashboard: one row per lane (queue backlog and oldest age, DLQ depth,
 * function invocations / errors / throttles, duration), then the job outcomes and blocked
 * workspaces that the handlers publish as custom metrics (contract/runtime-env.ts JOB_METRICS). The
 * dashboard searches by metric name, so extra dimensions (Powertools adds `service`) still show.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { Construct } from 'constructs';
import { JOB_METRICS } from '../../contract/runtime-env';
import type { QueueWithDlq } from './queue-with-dlq';
import type { Worker } from './worker';

export interface DashboardLane {
  readonly name: string;
  readonly queue: QueueWithDlq;
  readonly worker: Worker;
}

export interface OpsDashboardProps {
  readonly lanes: readonly DashboardLane[];
  /** Namespace of the handlers' custom metrics. */
  readonly metricsNamespace: string;
  /** @default 5 minutes */
  readonly period?: Duration;
}

const WIDTH = 6;

export class OpsDashboard extends Construct {
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: OpsDashboardProps) {
    super(scope, id);
    const period = props.period ?? Duration.minutes(5);
    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', { defaultInterval: Duration.hours(3) });
    for (const lane of props.lanes) this.dashboard.addWidgets(...laneWidgets(lane, period));

    const search = (
      metricName: string,
      label: string,
      statistic: 'Sum' | 'Maximum' = 'Sum',
    ): cloudwatch.MathExpression =>
      new cloudwatch.MathExpression({
        expression: `SEARCH('Namespace="${props.metricsNamespace}" MetricName="${metricName}"', '${statistic}', ${period.toSeconds()})`,
        label,
        period,
      });
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Jobs by outcome',
        width: WIDTH * 3,
        left: [
          search(JOB_METRICS.succeeded, 'succeeded'),
          search(JOB_METRICS.failed, 'failed'),
          search(JOB_METRICS.skipped, 'skipped'),
          search(JOB_METRICS.forwarded, 'forwarded to a stage'),
          search(JOB_METRICS.running, 'build started'),
        ],
      }),
      new cloudwatch.GraphWidget({
        title: 'Workspaces blocked',
        width: WIDTH,
        left: [search(JOB_METRICS.workspaceBlocked, 'blocked')],
      }),
      // Jobs waiting: for a limit (GitHub's answers, the platform's own pacing, the build quota, the checkout secrets' quotas) or a required verdict.
      new cloudwatch.GraphWidget({
        title: 'Limits: jobs waiting',
        width: WIDTH * 3,
        left: [
          search(JOB_METRICS.githubRateLimited, 'GitHub rate-limited'),
          search(JOB_METRICS.githubPaced, 'GitHub writes paced'),
          search(JOB_METRICS.buildsWaitingForQuota, 'builds waiting for quota'),
          search(JOB_METRICS.checkoutSecretsThrottled, 'checkout secrets throttled'),
          search(JOB_METRICS.jobsWaitingForRequirement, 'waiting for a required verdict'),
        ],
      }),
      // What the build reconciler found each run: jobs whose build's event never came.
      new cloudwatch.GraphWidget({
        title: 'Command-stage builds overdue (reconciler)',
        width: WIDTH * 4,
        left: [
          search(JOB_METRICS.overdueBuilds, 'overdue', 'Maximum'),
          search(JOB_METRICS.reconciled, 'completed by the reconciler'),
        ],
        right: [search(JOB_METRICS.oldestOverdueBuild, 'oldest overdue (s)', 'Maximum')],
      }),
    );
  }
}

function laneWidgets({ name, queue, worker }: DashboardLane, period: Duration): cloudwatch.IWidget[] {
  const max = { period, statistic: cloudwatch.Stats.MAXIMUM };
  const sum = { period, statistic: cloudwatch.Stats.SUM };
  const fn = worker.function;
  return [
    new cloudwatch.GraphWidget({
      title: `${name}: backlog and oldest message`,
      width: WIDTH,
      left: [queue.queue.metricApproximateNumberOfMessagesVisible({ ...max, label: 'visible' })],
      right: [queue.queue.metricApproximateAgeOfOldestMessage({ ...max, label: 'oldest age (s)' })],
    }),
    new cloudwatch.GraphWidget({
      title: `${name}: DLQ depth`,
      width: WIDTH,
      left: [queue.deadLetterQueue.metric('ApproximateNumberOfMessagesVisible', { ...max, label: 'DLQ visible' })],
    }),
    new cloudwatch.GraphWidget({
      title: `${name}: invocations and errors`,
      width: WIDTH,
      left: [
        fn.metricInvocations({ ...sum, label: 'invocations' }),
        fn.metricErrors({ ...sum, label: 'errors' }),
        fn.metricThrottles({ ...sum, label: 'throttles' }),
      ],
    }),
    new cloudwatch.GraphWidget({
      title: `${name}: duration`,
      width: WIDTH,
      left: [
        fn.metricDuration({ period, statistic: cloudwatch.Stats.percentile(99), label: 'p99' }),
        fn.metricDuration({ period, statistic: cloudwatch.Stats.AVERAGE, label: 'average' }),
      ],
    }),
  ];
}
