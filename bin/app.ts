/**
 * The CDK app: `npx cdk synth -c env=dev` (or prod, ...). Settings come from config/<env>.json
 * (which must exist: a new environment is declared by its file) and cdk context; see
 * lib/config.ts; the stack is built by lib/platform-app.ts. AwsSolutions checks (cdk-nag) run on every synth.
 *
 * A configuration mistake is the operator's to fix, not a bug: it prints its one message (naming
 * every bad setting) and exits 1, without a stack trace. Anything else still throws as usual.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { CiTrustStack } from '../lib/ci-trust-stack';
import { InvalidConfigError } from '../lib/config';
import { InvalidSettingsError } from '../lib/constructs/settings-problems';
import { addPlatformStack } from '../lib/platform-app';

function main(): void {
  const app = new App();
  addPlatformStack(app);
  // The CI trust (GitHub's OIDC provider and the workflows' roles), only when asked for:
  // `npx cdk deploy AgentJobs-ci-trust -c githubRepo=<owner>/<name>`; lib/ci-trust-stack.ts.
  const githubRepo = app.node.tryGetContext('githubRepo') as string | undefined;
  if (githubRepo !== undefined) {
    const list = (key: string): string[] | undefined =>
      (app.node.tryGetContext(key) as string | undefined)?.split(',').filter((name) => name !== '');
    new CiTrustStack(app, 'AgentJobs-ci-trust', {
      githubRepo,
      environments: list('githubEnvironments'),
      branches: list('githubBranches'),
      existingProviderArn: app.node.tryGetContext('githubOidcProviderArn') as string | undefined,
      description: `agent-jobs CI trust: GitHub OIDC roles of ${githubRepo} for cdk deploy and cdk diff`,
    });
  }
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
}

try {
  main();
} catch (error) {
  if (!(error instanceof InvalidConfigError || error instanceof InvalidSettingsError)) throw error;
  process.stderr.write(`${error.message}\n`);
  // exit now: the App would otherwise synthesize what was built so far when the process ends.
  process.exit(1);
}
