/**
 * A first deploy that works: the shipped configurations serve a repository as they are and
 * synthesize without a warning; an environment that would refuse every repository is refused at
 * synth, naming the setting; CodeBuild's documented limits bound the build settings.
 */
import { readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { MAX_BUILD_TIMEOUT_MINUTES, commandPayloadSchema } from '../../contract/job-types';
import { DEFAULT_BUILD_CONCURRENCY_QUOTA, LOWEST_NEW_ACCOUNT_BUILD_QUOTA } from '../../contract/limits';
import { AgentJobsStack } from '../../lib/agent-jobs-stack';
import { loadConfig, resolveConfig } from '../../lib/config';
import { ROOT, newApp } from './helpers';

const shipped = (env: string) => {
  const app = newApp();
  app.node.setContext('env', env);
  const config = loadConfig(app, join(ROOT, 'config'));
  const stack = new AgentJobsStack(app, `AgentJobs-${env}`, { config, projectRoot: ROOT });
  return { config, stack, template: Template.fromStack(stack) };
};

/** The README's example configuration, as the README shows it. */
const readmeExample = (): unknown => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const block = /Add `alarmEmail` and your secrets' ARNs[\s\S]*?```json\n([\s\S]*?)```/.exec(readme)?.[1];
  if (!block) throw new Error('README: no example configuration');
  return JSON.parse(block);
};

describe.each(['dev', 'prod'])('the shipped config/%s.json', (env) => {
  it('allows a git host, so a repository there is served', () => {
    expect(shipped(env).config.gitHosts).toContain('github.com');
  });

  it('synthesizes without a warning', () => {
    expect(Annotations.fromStack(shipped(env).stack).findWarning('*', Match.anyValue())).toEqual([]);
  });
});

it('the README example configuration allows a git host', () => {
  expect(resolveConfig('prod', readmeExample()).gitHosts).toContain('github.com');
});

it('an environment with no gitHosts is refused at synth, in one line naming the setting', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-jobs-config-'));
  try {
    writeFileSync(join(dir, 'staging.json'), '{}');
    const app = newApp();
    app.node.setContext('env', 'staging');
    expect(() => loadConfig(app, dir)).toThrow(
      /\n {2}- gitHosts: none is configured, so every repository would be refused \(HOST_NOT_ALLOWED\)[^\n]*$/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it("bounds the build timeout by CodeBuild's quota table (480 minutes), in the setting and in a job's payload", () => {
  expect(MAX_BUILD_TIMEOUT_MINUTES).toBe(480);
  expect(() => resolveConfig('dev', { testRunnerTimeoutMinutes: 481 })).toThrow(/testRunnerTimeoutMinutes: .*480/);
  expect(commandPayloadSchema.safeParse({ timeoutSeconds: 480 * 60 }).success).toBe(true);
  expect(commandPayloadSchema.safeParse({ timeoutSeconds: 480 * 60 + 1 }).success).toBe(false);
});

it("sets the project's concurrent build limit to a quota a new account has unless told the account's own", () => {
  expect(DEFAULT_BUILD_CONCURRENCY_QUOTA).toBeLessThanOrEqual(LOWEST_NEW_ACCOUNT_BUILD_QUOTA);
  shipped('prod').template.hasResourceProperties('AWS::CodeBuild::Project', {
    ConcurrentBuildLimit: DEFAULT_BUILD_CONCURRENCY_QUOTA,
  });
});
