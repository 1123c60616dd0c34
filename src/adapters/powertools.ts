/**
 * Powertools for AWS Lambda as the core's logger and metrics: one Logger and one Metrics per
 * container (module scope), shared by every invocation.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { JobType } from '../../contract/job-types';
import { METRICS_NAMESPACE } from '../../contract/runtime-env';
import type { JobMetrics } from '../core/ports';

const SERVICE_NAME = 'agent-jobs';

export const logger = new Logger({ serviceName: SERVICE_NAME });
export const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName: SERVICE_NAME });

/** Each count is flushed at once (single metric), so concurrent records never share dimensions. */
export function powertoolsJobMetrics(source: Metrics = metrics): JobMetrics {
  return {
    count(metric, jobType?: JobType) {
      const single = source.singleMetric();
      if (jobType) single.addDimension('jobType', jobType);
      single.addMetric(metric, MetricUnit.Count, 1);
    },
  };
}
