/**
 * The limits the stack is told about: the account's build quota (the project's concurrent build
 * limit), GitHub's content-creation
 * limit (each open_pr container's share), and the alarm on GitHub's rate limits. Derived from the
 * catalog's settings, never from its contents.
 */
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { allWorkers, COMMAND_JOB_TYPES } from '../../contract/job-types';
import { contentShare, DEFAULT_BUILD_CONCURRENCY_QUOTA } from '../../contract/limits';
import { ENV, JOB_METRICS } from '../../contract/runtime-env';
import { synth } from './helpers';

/** What the command stages' event source mappings can start at once with the catalog's settings. */
const asked = allWorkers()
  .filter((w) => (COMMAND_JOB_TYPES as readonly string[]).includes(w.name))
  .reduce((sum, w) => sum + w.settings.batchSize * w.settings.maxConcurrency, 0);

describe('the build quota', () => {
  it("is the project's concurrent build limit, and no synth warning compares it with the command stages' starts in flight", () => {
    for (const quota of [DEFAULT_BUILD_CONCURRENCY_QUOTA, asked - 1]) {
      const { stack, template } = synth({ buildConcurrencyQuota: quota });
      template.hasResourceProperties('AWS::CodeBuild::Project', { ConcurrentBuildLimit: quota });
      expect(Annotations.fromStack(stack).findWarning('*', Match.stringLikeRegexp('buildConcurrencyQuota'))).toEqual(
        [],
      );
    }
  });
});

describe("GitHub's limits", () => {
  it("gives open_pr its container's share of GitHub's content-creation limit", () => {
    const concurrency = 7;
    const { template } = synth({
      githubContentRequestsPerHour: 250,
      workers: { open_pr: { maxConcurrency: concurrency } },
    });
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectLike({
          [ENV.githubContentPerMinute]: String(contentShare(concurrency, 250).perMinute),
          [ENV.githubContentPerHour]: String(contentShare(concurrency, 250).perHour),
        }),
      },
    });
  });

  it('warns at synth when open_pr has more containers than the limit has pull requests a minute', () => {
    const { stack } = synth({ githubContentRequestsPerHour: 40, workers: { open_pr: { maxConcurrency: 41 } } });
    expect(
      Annotations.fromStack(stack).findWarning(
        '*',
        Match.stringLikeRegexp('41 containers at once cannot share 40 pull requests a minute'),
      ),
    ).toHaveLength(1);
  });

  it.each([
    ['GitHub keeps answering with rate limits', JOB_METRICS.githubRateLimited],
    [
      'Secrets Manager keeps throttling or refusing the checkout secrets (a wait no time may cure)',
      JOB_METRICS.checkoutSecretsThrottled,
    ],
  ])('alarms when %s, period after period, not at the first one', (_what, metricName) => {
    const { template } = synth();
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: metricName,
      Statistic: 'Sum',
      Threshold: 0,
      EvaluationPeriods: 3,
      ComparisonOperator: 'GreaterThanThreshold',
      AlarmActions: [Match.anyValue()],
    });
  });
});
