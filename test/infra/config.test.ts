/**
 * Configuration: defaults, per-worker overrides, one error naming every bad setting, and the
 * file + context loading of bin/app.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { JOB_TYPES, SEQUENCER } from '../../contract/job-types';
import { InvalidConfigError, loadConfig, resolveConfig } from '../../lib/config';
import { InvalidSettingsError } from '../../lib/constructs/settings-problems';
import { addStack, newApp } from './helpers';

describe('resolveConfig', () => {
  it('defaults to the catalog settings and GitHub.com', () => {
    const config = resolveConfig('dev', {});
    expect(config).toMatchObject({ envName: 'dev', githubApiUrl: 'https://api.github.com', testRunnerTimeoutMinutes: 60 });
    expect(config.workers.sequencer).toEqual(SEQUENCER);
    expect(config.workers.run_tests).toEqual(JOB_TYPES.run_tests.stage);
    expect(config.alarmEmail).toBeUndefined();
  });

  it('applies per-worker overrides on top of the catalog', () => {
    const config = resolveConfig('prod', { workers: { sequencer: { maxConcurrency: 50 }, open_pr: { timeoutSeconds: 30, memoryMb: 512 } } });
    expect(config.workers.sequencer).toEqual({ ...SEQUENCER, maxConcurrency: 50 });
    expect(config.workers.open_pr).toMatchObject({ timeoutSeconds: 30, memoryMb: 512, batchSize: JOB_TYPES.open_pr.stage.batchSize });
  });

  it('names every invalid setting in one error', () => {
    const bad = () => resolveConfig('dev', {
      alarmEmail: 'not-an-email',
      githubApiUrl: 'http://ghe.example.com',
      gitCredentialsSecretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:git',
      leaseSeconds: -1,
      workers: { sequencer: { batchSize: 2.5, queue: 'renamed' }, lint: {} },
      colour: 'blue',
    });
    expect(bad).toThrow(InvalidConfigError);
    for (const setting of [/alarmEmail:/, /githubApiUrl: must be an https URL/, /gitCredentialsSecretArn: must be a complete Secrets Manager secret ARN/,
      /leaseSeconds:/, /workers\.sequencer\.batchSize:/, /workers\.sequencer: .*queue/, /workers: .*lint/, /\(root\): .*colour/]) {
      expect(bad).toThrow(setting);
    }
  });

  it('rejects an environment name that cannot be part of a stack name', () => {
    expect(() => resolveConfig('../Prod', {})).toThrow(/env = "\.\.\/Prod": must match/);
  });
});

describe('loadConfig', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-jobs-config-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('reads config/<env>.json, then cdk context wins', () => {
    writeFileSync(join(dir, 'staging.json'), JSON.stringify({ alarmEmail: 'file@example.com', leaseSeconds: 300, workers: { run_tests: { maxConcurrency: 3 } } }));
    const app = new App({ context: { env: 'staging', alarmEmail: 'context@example.com', leaseSeconds: '600' } });
    const config = loadConfig(app, dir);
    expect(config).toMatchObject({ envName: 'staging', alarmEmail: 'context@example.com', leaseSeconds: 600 });
    expect(config.workers.run_tests.maxConcurrency).toBe(3);
  });

  it('defaults to dev without a file, and names the file when it holds no object or no JSON', () => {
    expect(loadConfig(new App(), dir).envName).toBe('dev');
    writeFileSync(join(dir, 'dev.json'), '[1]');
    expect(() => loadConfig(new App(), dir)).toThrow(/dev\.json[\s\S]*\(root\): must be a JSON object/);
    writeFileSync(join(dir, 'dev.json'), '{ "alarmEmail": ');
    expect(() => loadConfig(new App(), dir)).toThrow(/dev\.json[\s\S]*\(root\): not valid JSON/);
  });
});

it('a worker override that breaks a queue rule fails the synth naming each setting', () => {
  const create = () => addStack(newApp(), 'dev', { workers: { sequencer: { batchSize: 20, maxReceiveCount: 3, maxConcurrency: 1 } } });
  expect(create).toThrow(InvalidSettingsError);
  expect(create).toThrow(/AgentJobs-dev\/sequencer\/Queue has invalid settings/);
  expect(create).toThrow(/maxReceiveCount = 3[\s\S]*consumer\.batchSize = 20: must be 1\.\.10 on a FIFO queue[\s\S]*consumer\.maxConcurrency = 1/);
});

it('a worker timeout or memory size that Lambda refuses fails the synth naming each setting', () => {
  const create = () => addStack(newApp(), 'dev', { workers: { open_pr: { timeoutSeconds: 901, memoryMb: 100 } } });
  expect(create).toThrow(InvalidSettingsError);
  expect(create).toThrow(/AgentJobs-dev\/open_pr\/Worker has invalid settings:[\s\S]*timeout = 901: must be 1\.\.900 seconds[\s\S]*memorySize = 100: must be 128\.\.10240 MB/);
  expect(() => addStack(newApp(), 'dev', { workers: { open_pr: { timeoutSeconds: 900, memoryMb: 10_240 } } })).not.toThrow();
});

it('a test build that can outlast what its run_tests job waits for fails the synth naming the setting', () => {
  const { timeoutSeconds, maxReceiveCount } = JOB_TYPES.run_tests.stage;
  const budgetMinutes = (timeoutSeconds * maxReceiveCount) / 60;
  expect(() => addStack(newApp(), 'dev', { testRunnerTimeoutMinutes: budgetMinutes })).not.toThrow();
  const create = () => addStack(newApp(), 'dev', { testRunnerTimeoutMinutes: budgetMinutes + 1 });
  expect(create).toThrow(InvalidSettingsError);
  expect(create).toThrow(new RegExp(`testRunnerTimeoutMinutes = ${budgetMinutes + 1}: must be at most ${budgetMinutes}`));
  // The budget follows the worker's own overrides.
  expect(() => addStack(newApp(), 'dev', { testRunnerTimeoutMinutes: budgetMinutes + 1, workers: { run_tests: { maxReceiveCount: maxReceiveCount + 1 } } })).not.toThrow();
});
