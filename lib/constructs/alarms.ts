/**
 * One alarm shape for the whole platform: "more than `threshold` in one evaluation period" (or in
 * each of `evaluationPeriods`), missing
 * data is not breaching (an idle queue or function is healthy), and every alarm notifies the one
 * action the caller hands in (the platform's SNS topic).
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type { Construct } from 'constructs';

/** Period over which every alarm metric is aggregated. */
export const ALARM_PERIOD = Duration.minutes(5);

export interface AlarmSpec {
  readonly metric: cloudwatch.IMetric;
  /** The alarm fires when the metric is greater than this. */
  readonly threshold: number;
  readonly description: string;
  readonly action: cloudwatch.IAlarmAction;
  /** Consecutive periods the metric must be above the threshold: more than one for what matters only when it persists. @default 1 */
  readonly evaluationPeriods?: number;
}

export function alarmAbove(scope: Construct, id: string, spec: AlarmSpec): cloudwatch.Alarm {
  const alarm = new cloudwatch.Alarm(scope, id, {
    metric: spec.metric,
    threshold: spec.threshold,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: spec.evaluationPeriods ?? 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    alarmDescription: spec.description,
  });
  alarm.addAlarmAction(spec.action);
  return alarm;
}
