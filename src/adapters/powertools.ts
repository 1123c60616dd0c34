/**
 * Powertools for AWS Lambda as the core's logger and metrics: one Logger and one Metrics per
 * container (module scope), shared by every invocation.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { JobType } from '../../contract/job-types';
import { METRICS_NAMESPACE, METRICS_SERVICE } from '../../contract/runtime-env';
import type { JobMetrics } from '../core/ports';

export const logger = new Logger({ serviceName: METRICS_SERVICE });
export const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName: METRICS_SERVICE });

/** Each count is flushed at once (single metric), so concurrent records never share dimensions. */
export function powertoolsJobMetrics(source: Metrics = metrics): JobMetrics {
  return {
    count(metric, jobType?: JobType) {
      const single = source.singleMetric();
      if (jobType) single.addDimension('jobType', jobType);
      single.addMetric(metric, MetricUnit.Count, 1);
    },
    gauge(metric, value, unit) {
      source.singleMetric().addMetric(metric, unit === 'Seconds' ? MetricUnit.Seconds : MetricUnit.Count, value);
    },
  };
}
