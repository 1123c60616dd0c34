/**
 * The platform as `cdk synth -c env=<name>` builds it: the configuration of `config/<name>.json`
 * and cdk context, one `AgentJobs-<name>` stack. bin/app.ts runs it for the CDK CLI; the release
 * templates (bin/release-templates.ts) and the upgrade guard's test synthesize each shipped
 * environment through it, so what they compare is what a deploy would send.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { AgentJobsStack } from './agent-jobs-stack';
import { loadConfig } from './config';

export const PROJECT_ROOT = join(__dirname, '..');
export const CONFIG_DIR = join(PROJECT_ROOT, 'config');

/** The platform stack of the environment the app's context names (`env`, default dev). */
export function addPlatformStack(app: App, configDir = CONFIG_DIR): AgentJobsStack {
  const config = loadConfig(app, configDir);
  return new AgentJobsStack(app, `AgentJobs-${config.envName}`, {
    config,
    description: `agent-jobs platform (${config.envName}): ordered coding-agent jobs on SQS FIFO, Lambda and DynamoDB`,
  });
}

/** The environments the repository ships: one per `config/<env>.json`, sorted. */
export function shippedEnvironments(configDir = CONFIG_DIR): string[] {
  return readdirSync(configDir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -'.json'.length))
    .sort();
}

/** cdk.json's context (the feature flags `cdk synth` applies), for an App built outside the CLI. */
export function cdkJsonContext(root = PROJECT_ROOT): Record<string, unknown> {
  return (JSON.parse(readFileSync(join(root, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> }).context;
}

/**
 * The CloudFormation template `cdk synth -c env=<envName>` writes, without running esbuild
 * (bundling only changes asset hashes, and those say nothing about the resources).
 */
export function synthesizeEnvironment(
  envName: string,
  configDir = CONFIG_DIR,
): { stackName: string; template: Record<string, unknown> } {
  const app = new App({ context: { ...cdkJsonContext(), env: envName, 'aws:cdk:bundling-stacks': [] } });
  const stack = addPlatformStack(app, configDir);
  const template = app.synth().getStackArtifact(stack.artifactId).template as Record<string, unknown>;
  return { stackName: stack.stackName, template };
}
