import type { Context } from 'aws-lambda';
import { ConfigurationError } from '../../src/core/errors';
import { handler as openPrHandler } from '../../src/handlers/open-pr';
import { handler as runTestsHandler } from '../../src/handlers/run-tests';

/** The stage handlers read their settings at the first invocation and name what is missing. */
describe('stage handlers at cold start', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  const complete = {
    LEDGER_TABLE_NAME: 'ledger',
    LEDGER_RETENTION_DAYS: '30',
    DLQ_URL: 'https://sqs.us-east-1.amazonaws.com/123456789012/stage-dlq',
    EVENT_BUS_NAME: 'bus',
    LEASE_SECONDS: '300',
    MAX_RECEIVE_COUNT: '5',
    VISIBILITY_TIMEOUT_SECONDS: '5400',
  };

  it.each([
    ['run_tests', 'TEST_RUNNER_PROJECT_NAME', () => runTestsHandler({ Records: [] }, {} as Context)],
    ['open_pr', 'GITHUB_TOKEN_SECRET_ARN', () => openPrHandler({ Records: [] }, {} as Context)],
  ])('%s throws a ConfigurationError naming %s when it is not set', (_type, missing, invoke) => {
    Object.assign(process.env, complete);
    delete process.env[missing];

    expect(invoke).toThrow(ConfigurationError);
    expect(invoke).toThrow(missing);
  });

  // Last: a handler that was built is kept for the container's life.
  it('builds both handlers from a complete environment and answers an empty batch', async () => {
    Object.assign(process.env, complete, {
      TEST_RUNNER_PROJECT_NAME: 'tests',
      GITHUB_TOKEN_SECRET_ARN: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:github-AbCdEf',
    });

    await expect(runTestsHandler({ Records: [] }, {} as Context)).resolves.toEqual({ batchItemFailures: [] });
    await expect(openPrHandler({ Records: [] }, {} as Context)).resolves.toEqual({ batchItemFailures: [] });
  });
});
