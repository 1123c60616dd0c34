/**
 * Synthesizes the stack the way `cdk synth` does (cdk.json feature flags, config resolved from an
 * input object), with asset bundling skipped unless asked for: esbuild runs in one test only.
 */
import { App, type PolicyViolation } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { AgentJobsStack } from '../../lib/agent-jobs-stack';
import { resolveConfig } from '../../lib/config';
import { cdkJsonContext, PROJECT_ROOT } from '../../lib/platform-app';

export const ROOT = PROJECT_ROOT;

export function newApp(options: { bundle?: boolean; outdir?: string } = {}): App {
  return new App({
    context: { ...cdkJsonContext(), ...(options.bundle ? {} : { 'aws:cdk:bundling-stacks': [] }) },
    ...(options.outdir === undefined ? {} : { outdir: options.outdir }),
  });
}

export function addStack(app: App, envName: string, input: unknown = {}): AgentJobsStack {
  const config = resolveConfig(envName, input);
  return new AgentJobsStack(app, `AgentJobs-${envName}`, { config, projectRoot: ROOT });
}

export function synth(input: unknown = {}, envName = 'dev'): { app: App; stack: AgentJobsStack; template: Template } {
  const app = newApp();
  const stack = addStack(app, envName, input);
  return { app, stack, template: Template.fromStack(stack) };
}

/** AwsSolutions findings left after acknowledgements, as `rule at path` lines. */
export function nagFindings(app: App): string[] {
  const report = new AwsSolutionsChecks().validateScope(app);
  return report.violations.flatMap((v: PolicyViolation) =>
    v.violatingResources.map((r) => `${v.ruleName} at ${r.constructPath}`),
  );
}
