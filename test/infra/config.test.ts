/**
 * Configuration: defaults, per-worker overrides, one error naming every bad setting, and the
 * file + context loading of bin/app.ts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { JOB_TYPES, SEQUENCER } from '../../contract/job-types';
import { type AgentJobsConfig, InvalidConfigError, SETTING_NAMES, loadConfig, resolveConfig } from '../../lib/config';
import { InvalidSettingsError } from '../../lib/constructs/settings-problems';
import { AgentJobsStack } from '../../lib/agent-jobs-stack';
import { ROOT, addStack, newApp } from './helpers';

describe('resolveConfig', () => {
  it('defaults to the catalog settings and GitHub.com', () => {
    const config = resolveConfig('dev', {});
    expect(config).toMatchObject({
      envName: 'dev',
      githubApiUrl: 'https://api.github.com',
      testRunnerTimeoutMinutes: 60,
    });
    expect(config.workers.sequencer).toEqual(SEQUENCER);
    expect(config.workers.run_tests).toEqual(JOB_TYPES.run_tests.stage);
    expect(config.alarmEmail).toBeUndefined();
  });

  it('applies per-worker overrides on top of the catalog', () => {
    const config = resolveConfig('prod', {
      workers: { sequencer: { maxConcurrency: 50 }, open_pr: { timeoutSeconds: 30, memoryMb: 512 } },
    });
    expect(config.workers.sequencer).toEqual({ ...SEQUENCER, maxConcurrency: 50 });
    expect(config.workers.open_pr).toMatchObject({
      timeoutSeconds: 30,
      memoryMb: 512,
      batchSize: JOB_TYPES.open_pr.stage.batchSize,
    });
  });

  it('names every invalid setting in one error', () => {
    const bad = () =>
      resolveConfig('dev', {
        alarmEmail: 'not-an-email',
        githubApiUrl: 'http://ghe.example.com',
        gitCredentialsSecretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:git',
        leaseSeconds: -1,
        workers: { sequencer: { batchSize: 2.5, queue: 'renamed' }, lint: {} },
        colour: 'blue',
      });
    expect(bad).toThrow(InvalidConfigError);
    for (const setting of [
      /alarmEmail:/,
      /githubApiUrl: must be an https URL/,
      /gitCredentialsSecretArn: must be a complete Secrets Manager secret ARN/,
      /leaseSeconds:/,
      /workers\.sequencer\.batchSize:/,
      /workers\.sequencer: .*queue/,
      /workers: .*lint/,
      /\(root\): .*colour/,
    ]) {
      expect(bad).toThrow(setting);
    }
  });

  it('allows no git host by default, and refuses a host entry that is not a host or that AWS workers never dial', () => {
    expect(resolveConfig('dev', {}).gitHosts).toEqual([]);
    expect(resolveConfig('dev', { gitHosts: ['GitHub.com', 'git.example.com:8443'] }).gitHosts).toEqual([
      'GitHub.com',
      'git.example.com:8443',
    ]);
    const bad = () =>
      resolveConfig('dev', {
        gitHosts: ['https://github.com/org', '169.254.169.254', 'localhost:8080', '[::ffff:127.0.0.1]'],
      });
    expect(bad).toThrow(InvalidConfigError);
    for (const problem of [
      /"https:\/\/github.com\/org" is not a host name or name:port/,
      /"169.254.169.254": 169.254.169.254 is a loopback, link-local or metadata address, never dialled on AWS/,
      /"localhost:8080": localhost names loopback or a metadata service/,
      /"\[::ffff:127.0.0.1\]": \[::ffff:7f00:1\] is a loopback/,
    ]) {
      expect(bad).toThrow(problem);
    }
    expect(() => resolveConfig('dev', { gitHosts: 42 })).toThrow(/gitHosts: must be a list of host names/);
  });

  it('rejects an environment name that cannot be part of a stack name', () => {
    expect(() => resolveConfig('../Prod', {})).toThrow(/env = "\.\.\/Prod": must match/);
  });
});

/** What a deployed environment's file needs at least: a git host (loadConfig refuses none). */
const ALLOWED = { gitHosts: ['git.example.com'] };

describe('loadConfig', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-jobs-config-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('reads config/<env>.json, then cdk context wins', () => {
    writeFileSync(
      join(dir, 'staging.json'),
      JSON.stringify({
        ...ALLOWED,
        alarmEmail: 'file@example.com',
        leaseSeconds: 300,
        workers: { run_tests: { maxConcurrency: 3 } },
      }),
    );
    const app = new App({ context: { env: 'staging', alarmEmail: 'context@example.com', leaseSeconds: '600' } });
    const config = loadConfig(app, dir);
    expect(config).toMatchObject({ envName: 'staging', alarmEmail: 'context@example.com', leaseSeconds: 600 });
    expect(config.workers.run_tests.maxConcurrency).toBe(3);
  });

  it('reads every nested setting from context as a dotted key, over the file, leaf by leaf', () => {
    writeFileSync(
      join(dir, 'dev.json'),
      JSON.stringify({ ...ALLOWED, workers: { sequencer: { batchSize: 4, maxConcurrency: 20 } } }),
    );
    const app = new App({
      context: { 'workers.sequencer.batchSize': '7', 'workers.open_pr.memoryMb': '512', retainOnDestroy: 'false' },
    });
    const config = loadConfig(app, dir);
    expect(config.workers.sequencer).toMatchObject({ batchSize: 7, maxConcurrency: 20 });
    expect(config.workers.open_pr.memoryMb).toBe(512);
    expect(config.retainOnDestroy).toBe(false);
  });

  it("fails on a context key that is no setting instead of ignoring it, and skips the CDK's own keys", () => {
    writeFileSync(join(dir, 'dev.json'), JSON.stringify(ALLOWED));
    const app = (context: Record<string, unknown>) =>
      new App({ context: { ...newApp().node.getAllContext(), ...context } });
    const unknown = () =>
      loadConfig(
        app({ colour: 'blue', 'workers.sequencer.batchsize': '5', 'workers.linter.timeoutSeconds': '9' }),
        dir,
      );
    for (const problem of [
      /\(root\): Unrecognized key: "colour"/,
      /workers\.sequencer: Unrecognized key: "batchsize"/,
      /workers: Unrecognized key: "linter"/,
    ]) {
      expect(unknown).toThrow(problem);
    }
    expect(
      loadConfig(app({ 'acknowledged-issue-numbers': [1], 'availability-zones:account=1:region=x': ['a'] }), dir)
        .envName,
    ).toBe('dev');
  });

  it('refuses secretsKmsKeyArn when no secret is given by ARN, and a flag that is not true or false', () => {
    const key = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';
    expect(() => resolveConfig('dev', { secretsKmsKeyArn: key })).toThrow(
      /secretsKmsKeyArn: applies to secrets given by ARN only/,
    );
    expect(() => resolveConfig('dev', { retainOnDestroy: 'no' })).toThrow(/retainOnDestroy: must be true or false/);
  });

  it('defaults to dev, refuses an environment without its file naming the known ones, and names the file when it holds no object or no JSON', () => {
    writeFileSync(join(dir, 'prod.json'), '{}');
    expect(() => loadConfig(new App(), dir)).toThrow(
      /env = "dev": there is no .*\/dev\.json \(known environments: prod\)/,
    );
    writeFileSync(join(dir, 'dev.json'), JSON.stringify(ALLOWED));
    expect(loadConfig(new App(), dir).envName).toBe('dev');
    writeFileSync(join(dir, 'dev.json'), '[1]');
    expect(() => loadConfig(new App(), dir)).toThrow(/dev\.json[\s\S]*\(root\): must be a JSON object/);
    writeFileSync(join(dir, 'dev.json'), '{ "alarmEmail": ');
    expect(() => loadConfig(new App(), dir)).toThrow(/dev\.json[\s\S]*\(root\): not valid JSON/);
  });
});

describe('every documented setting', () => {
  const secret = (name: string) => `arn:aws:secretsmanager:eu-west-1:123456789012:secret:agent-jobs/${name}-AbCdEf`;
  /** An example per setting: the context string, and the value the configuration must then hold. */
  const EXAMPLES: Record<
    string,
    { context: string; read: (c: AgentJobsConfig) => unknown; expected: unknown; with?: Record<string, unknown> }
  > = {
    env: { context: 'staging', read: (c) => c.envName, expected: 'staging' },
    'workers.<name>.timeoutSeconds': { context: '100', read: (c) => c.workers.open_pr.timeoutSeconds, expected: 100 },
    'workers.<name>.memoryMb': { context: '2048', read: (c) => c.workers.open_pr.memoryMb, expected: 2048 },
    'workers.<name>.batchSize': { context: '3', read: (c) => c.workers.open_pr.batchSize, expected: 3 },
    'workers.<name>.maxConcurrency': { context: '40', read: (c) => c.workers.open_pr.maxConcurrency, expected: 40 },
    'workers.<name>.maxReceiveCount': { context: '8', read: (c) => c.workers.open_pr.maxReceiveCount, expected: 8 },
    'workers.<name>.oldestMessageAlarmSeconds': {
      context: '60',
      read: (c) => c.workers.open_pr.oldestMessageAlarmSeconds,
      expected: 60,
    },
    alarmEmail: { context: 'ops@example.com', read: (c) => c.alarmEmail, expected: 'ops@example.com' },
    gitCredentialsSecretArn: {
      context: secret('git'),
      read: (c) => c.gitCredentialsSecretArn,
      expected: secret('git'),
    },
    gitReadCredentialsSecretArn: {
      context: secret('read'),
      read: (c) => c.gitReadCredentialsSecretArn,
      expected: secret('read'),
    },
    githubTokenSecretArn: { context: secret('gh'), read: (c) => c.githubTokenSecretArn, expected: secret('gh') },
    secretsKmsKeyArn: {
      context: 'arn:aws:kms:eu-west-1:123456789012:key/mrk-1234abcd',
      read: (c) => c.secretsKmsKeyArn,
      expected: 'arn:aws:kms:eu-west-1:123456789012:key/mrk-1234abcd',
      with: { githubTokenSecretArn: secret('gh') },
    },
    gitHosts: {
      context: 'github.com,git.example.com:8443',
      read: (c) => c.gitHosts,
      expected: ['github.com', 'git.example.com:8443'],
    },
    githubApiUrl: {
      context: 'https://ghe.example.com/api/v3',
      read: (c) => c.githubApiUrl,
      expected: 'https://ghe.example.com/api/v3',
    },
    githubContentRequestsPerHour: { context: '250', read: (c) => c.githubContentRequestsPerHour, expected: 250 },
    buildConcurrencyQuota: { context: '60', read: (c) => c.buildConcurrencyQuota, expected: 60 },
    leaseSeconds: { context: '300', read: (c) => c.leaseSeconds, expected: 300 },
    testRunnerTimeoutMinutes: { context: '30', read: (c) => c.testRunnerTimeoutMinutes, expected: 30 },
    retainOnDestroy: { context: 'false', read: (c) => c.retainOnDestroy, expected: false },
  };
  const contextKey = (setting: string) => setting.replace('<name>', 'open_pr');

  it("is exactly the README's configuration table", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const table = readme.slice(
      readme.indexOf('## Configuration'),
      readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1),
    );
    const documented = [...table.matchAll(/^\| `([^`]+)`/gm)].map((m) => m[1]);
    expect(documented.sort()).toEqual([...SETTING_NAMES].sort());
    expect(Object.keys(EXAMPLES).sort()).toEqual([...SETTING_NAMES].sort());
  });

  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-jobs-config-'));
    // Each environment the examples name has its file (an environment without one is refused).
    for (const env of ['dev', 'staging']) writeFileSync(join(dir, `${env}.json`), JSON.stringify(ALLOWED));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it.each(Object.keys(EXAMPLES))('%s works from cdk context', (setting) => {
    const { context, read, expected, with: extra = {} } = EXAMPLES[setting]!;
    const config = loadConfig(new App({ context: { ...extra, [contextKey(setting)]: context } }), dir);
    expect(read(config)).toEqual(expected);
    expect(read(resolveConfig('dev', extra))).not.toEqual(expected);
  });

  it.each(Object.keys(EXAMPLES).filter((s) => s !== 'env'))('%s works from config/<env>.json', (setting) => {
    const { read, expected, with: extra = {} } = EXAMPLES[setting]!;
    const nested = contextKey(setting)
      .split('.')
      .reduceRight<unknown>((value, key) => ({ [key]: value }), expected) as Record<string, unknown>;
    writeFileSync(join(dir, 'dev.json'), JSON.stringify({ ...ALLOWED, ...extra, ...nested }));
    expect(read(loadConfig(new App(), dir))).toEqual(expected);
  });
});

describe('the shipped config/dev.json and config/prod.json', () => {
  it.each(['dev', 'prod'])('%s loads and synthesizes', (env) => {
    const app = newApp();
    app.node.setContext('env', env);
    const config = loadConfig(app, join(ROOT, 'config'));
    expect(config.envName).toBe(env);
    expect(() => new AgentJobsStack(app, `AgentJobs-${env}`, { config, projectRoot: ROOT })).not.toThrow();
  });

  it('prod keeps what holds jobs and credentials; dev lets them go with the stack', () => {
    const load = (env: string) => {
      const app = new App();
      app.node.setContext('env', env);
      return loadConfig(app, join(ROOT, 'config'));
    };
    expect([load('prod').retainOnDestroy, load('dev').retainOnDestroy]).toEqual([true, false]);
  });
});

/**
 * What `cdk synth -c key=value ...` runs: the app, with the context in CDK_CONTEXT_JSON, writing
 * into a scratch output directory; returns the run and the names the app wrote there.
 */
function synthApp(context: Record<string, unknown>): { status: number | null; stderr: string; written: string[] } {
  const outdir = mkdtempSync(join(tmpdir(), 'agent-jobs-synth-'));
  try {
    const run = spawnSync(join(ROOT, 'node_modules', '.bin', 'tsx'), [join(ROOT, 'bin', 'app.ts')], {
      cwd: ROOT,
      encoding: 'utf8',
      env: {
        ...process.env,
        CDK_OUTDIR: outdir,
        CDK_CONTEXT_JSON: JSON.stringify({ ...context, 'aws:cdk:bundling-stacks': [] }),
      },
    });
    return { status: run.status, stderr: run.stderr, written: readdirSync(outdir) };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

it('`cdk synth` with a bad setting prints one message naming it, without a stack trace, and exits 1', () => {
  const run = synthApp({ 'workers.sequencer.batchSize': '50' });
  expect(run.status).toBe(1);
  expect(run.stderr).toMatch(
    /^AgentJobs-dev\/sequencer\/Queue has invalid settings:\n {2}- consumer\.batchSize = 50: must be 1\.\.10 on a FIFO queue\n$/,
  );
});

it('a worker override that breaks a queue rule fails the synth naming each setting', () => {
  const create = () =>
    addStack(newApp(), 'dev', { workers: { sequencer: { batchSize: 20, maxReceiveCount: 3, maxConcurrency: 1 } } });
  expect(create).toThrow(InvalidSettingsError);
  expect(create).toThrow(/AgentJobs-dev\/sequencer\/Queue has invalid settings/);
  expect(create).toThrow(
    /maxReceiveCount = 3[\s\S]*consumer\.batchSize = 20: must be 1\.\.10 on a FIFO queue[\s\S]*consumer\.maxConcurrency = 1/,
  );
});

it('a worker timeout or memory size that Lambda refuses fails the synth naming each setting', () => {
  const create = () => addStack(newApp(), 'dev', { workers: { open_pr: { timeoutSeconds: 901, memoryMb: 100 } } });
  expect(create).toThrow(InvalidSettingsError);
  expect(create).toThrow(
    /AgentJobs-dev\/open_pr\/Worker has invalid settings:[\s\S]*timeout = 901: must be 1\.\.900 seconds[\s\S]*memorySize = 100: must be 128\.\.10240 MB/,
  );
  expect(() =>
    addStack(newApp(), 'dev', { workers: { open_pr: { timeoutSeconds: 900, memoryMb: 10_240 } } }),
  ).not.toThrow();
});

it("a build may run up to CodeBuild's quota: no function waits for it, so only that limit is checked", () => {
  expect(() => addStack(newApp(), 'dev', { testRunnerTimeoutMinutes: 480 })).not.toThrow();
  expect(() => resolveConfig('dev', { testRunnerTimeoutMinutes: 481 })).toThrow(/testRunnerTimeoutMinutes: .*480/);
});

it('`cdk synth -c env=prd` with no config/prd.json is refused, naming the known environments, and writes no stack', () => {
  const run = synthApp({ env: 'prd' });
  const known = readdirSync(join(ROOT, 'config'))
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.replace(/\.json$/, ''));
  expect(run.status).toBe(1);
  expect(run.stderr).toContain('env = "prd": there is no config/prd.json');
  expect(run.stderr).toContain(`known environments: ${known.sort().join(', ')}`);
  expect(run.written.filter((f) => f.includes('AgentJobs-prd'))).toEqual([]);
});
