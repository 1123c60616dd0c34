import type { Context } from 'aws-lambda';
import { COMMAND_JOB_TYPES } from '../../contract/job-types';
import { stageDlqUrlEnv } from '../../contract/runtime-env';
import { commandJobTypeFromEnv } from '../../src/compose/aws-command-stage';
import { ConfigurationError } from '../../src/core/errors';
import { handler as buildEventsHandler } from '../../src/handlers/build-events';
import { handler as commandStageHandler } from '../../src/handlers/command-stage';
import { handler as openPrHandler } from '../../src/handlers/open-pr';

/** The handlers read their settings at the first invocation and name what is missing or wrong. */
describe('handlers at cold start', () => {
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
    VISIBILITY_TIMEOUT_SECONDS: '360',
  };
  const commandStage = {
    STAGE_JOB_TYPE: 'run_tests',
    TEST_RUNNER_PROJECT_NAME: 'tests',
    BUILD_TIMEOUT_MINUTES: '60',
    GIT_READ_CREDENTIALS_SECRET_ARN: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:git-read-AbCdEf',
    CHECKOUT_SECRET_PREFIX: 'agent-jobs/AgentJobs-test/checkout/',
  };
  const emptyBatch = { Records: [] };

  it.each([
    ['a command stage', 'STAGE_JOB_TYPE', () => commandStageHandler(emptyBatch, {} as Context)],
    ['a command stage', 'TEST_RUNNER_PROJECT_NAME', () => commandStageHandler(emptyBatch, {} as Context)],
    ['a command stage', 'GIT_READ_CREDENTIALS_SECRET_ARN', () => commandStageHandler(emptyBatch, {} as Context)],
    ['a command stage', 'CHECKOUT_SECRET_PREFIX', () => commandStageHandler(emptyBatch, {} as Context)],
    ['open_pr', 'GITHUB_TOKEN_SECRET_ARN', () => openPrHandler(emptyBatch, {} as Context)],
    ['build-events', 'STAGE_DLQ_URL_RUN_TESTS', () => buildEventsHandler(emptyBatch, {} as Context)],
  ])('%s throws a ConfigurationError naming %s when it is not set', (_what, missing, invoke) => {
    Object.assign(process.env, complete, commandStage);
    delete process.env[missing];

    expect(invoke).toThrow(ConfigurationError);
    expect(invoke).toThrow(missing);
  });

  // Last: a handler that was built is kept for the container's life.
  it('builds every handler from a complete environment and answers an empty batch', async () => {
    Object.assign(process.env, complete, commandStage, {
      GITHUB_TOKEN_SECRET_ARN: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:github-AbCdEf',
      // open_pr's share of GitHub's content-creation limits (the stack sets both).
      GITHUB_CONTENT_PER_MINUTE: '16',
      GITHUB_CONTENT_PER_HOUR: '100',
      // The completion path copies a failed job to its stage's DLQ: one per command stage of the catalog.
      ...Object.fromEntries(
        COMMAND_JOB_TYPES.map((type) => [
          stageDlqUrlEnv(type),
          `https://sqs.us-east-1.amazonaws.com/123456789012/${type}-dlq`,
        ]),
      ),
    });

    await expect(commandStageHandler(emptyBatch, {} as Context)).resolves.toEqual({ batchItemFailures: [] });
    await expect(openPrHandler(emptyBatch, {} as Context)).resolves.toEqual({ batchItemFailures: [] });
    await expect(buildEventsHandler(emptyBatch, {} as Context)).resolves.toEqual({ batchItemFailures: [] });
  });
});

describe('the command-stage function', () => {
  it('names a STAGE_JOB_TYPE that is not a command stage of the catalog', () => {
    expect(() => commandJobTypeFromEnv({ STAGE_JOB_TYPE: 'open_pr' })).toThrow(
      /STAGE_JOB_TYPE is "open_pr", which is not a command stage/,
    );
  });
});
