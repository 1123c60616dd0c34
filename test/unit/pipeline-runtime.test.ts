import { JOB_TYPES, JOB_TYPE_NAMES, SEQUENCER } from '../../contract/job-types';
import { ENV, stageQueueUrlEnv } from '../../contract/runtime-env';
import {
  awsClientConfig,
  ledgerFromEnv,
  pipelineSettingsFromEnv,
  positiveIntEnv,
  requireEnv,
} from '../../src/compose/aws';
import { awsSequencerDeps } from '../../src/compose/aws-sequencer';
import { ConfigurationError } from '../../src/core/errors';

/** Every variable the stack sets for the sequencer. */
const sequencerEnv = (): NodeJS.ProcessEnv => ({
  [ENV.ledgerTable]: 'ledger',
  [ENV.ledgerRetentionDays]: '30',
  [ENV.leaseSeconds]: '180',
  [ENV.maxReceiveCount]: '5',
  [ENV.visibilityTimeoutSeconds]: String(SEQUENCER.timeoutSeconds * 6),
  [ENV.dlqUrl]: 'https://sqs.eu-west-1.amazonaws.com/1/agent-jobs-dlq.fifo',
  [ENV.eventBus]: 'bus',
  [ENV.diffBucket]: 'diffs',
  [ENV.gitCredentialsSecretArn]: 'arn:aws:secretsmanager:eu-west-1:1:secret:git',
  // One per stage of the catalog.
  ...Object.fromEntries(
    JOB_TYPE_NAMES.flatMap((type) => {
      const { stage } = JOB_TYPES[type] as { stage?: { queue: string } };
      return stage ? [[stageQueueUrlEnv(type), `https://sqs.eu-west-1.amazonaws.com/1/${stage.queue}`]] : [];
    }),
  ),
});

describe('cold-start configuration', () => {
  it('names a missing or empty variable', () => {
    expect(() => requireEnv('LEDGER_TABLE_NAME', {})).toThrow(
      new ConfigurationError('environment variable LEDGER_TABLE_NAME is not set'),
    );
    expect(() => requireEnv('LEDGER_TABLE_NAME', { LEDGER_TABLE_NAME: '' })).toThrow(ConfigurationError);
  });

  it('rejects a number setting that is not a positive integer, naming it and the value', () => {
    for (const raw of ['abc', '0', '-3', '1.5']) {
      expect(() => positiveIntEnv(ENV.leaseSeconds, { [ENV.leaseSeconds]: raw })).toThrow(
        `${ENV.leaseSeconds} must be a positive integer, got "${raw}"`,
      );
    }
  });

  it('derives the pipeline settings from the environment the stack sets', () => {
    expect(pipelineSettingsFromEnv('sequencer', sequencerEnv())).toEqual({
      consumer: 'sequencer',
      leaseSeconds: 180,
      maxReceiveCount: 5,
      visibilitySeconds: SEQUENCER.timeoutSeconds * 6,
      backoff: { baseSeconds: 10, capSeconds: 900 },
    });
  });

  it("heartbeats to the queue's visibility as deployed: an environment's timeout override, not the catalog's value", () => {
    // workers.sequencer.timeoutSeconds = 900 deploys the queue with 5400 s (6 x 900); the catalog's 120 s would give 720 s.
    const env = { ...sequencerEnv(), [ENV.leaseSeconds]: '900', [ENV.visibilityTimeoutSeconds]: '5400' };
    expect(pipelineSettingsFromEnv('sequencer', env)).toMatchObject({ leaseSeconds: 900, visibilitySeconds: 5400 });
    expect(awsSequencerDeps(env).settings.visibilitySeconds).toBe(5400);
  });

  it('points the SDK clients at AWS_ENDPOINT_URL only when it is set', () => {
    expect(awsClientConfig({ AWS_ENDPOINT_URL: 'http://127.0.0.1:4566' })).toEqual({
      endpoint: 'http://127.0.0.1:4566',
    });
    expect(awsClientConfig({})).toEqual({});
  });

  it('builds the ledger only with its table and retention set', () => {
    expect(() => ledgerFromEnv(undefined, { [ENV.ledgerRetentionDays]: '30' })).toThrow(ENV.ledgerTable);
  });

  it('fails the sequencer at cold start naming each missing variable', () => {
    expect(() => awsSequencerDeps(sequencerEnv())).not.toThrow();
    for (const name of Object.keys(sequencerEnv())) {
      const env = sequencerEnv();
      delete env[name];
      expect(() => awsSequencerDeps(env)).toThrow(`environment variable ${name} is not set`);
    }
  });
});
