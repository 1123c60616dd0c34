/**
 * The CDK app: `npx cdk synth -c env=dev` (or prod, ...). Settings come from config/<env>.json
 * (optional) and cdk context; see lib/config.ts. AwsSolutions checks (cdk-nag) run on every synth.
 */
import { join } from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { AgentJobsStack } from '../lib/agent-jobs-stack';
import { loadConfig } from '../lib/config';

const app = new App();
const config = loadConfig(app, join(__dirname, '..', 'config'));
new AgentJobsStack(app, `AgentJobs-${config.envName}`, {
  config,
  description: `agent-jobs platform (${config.envName}): ordered coding-agent jobs on SQS FIFO, Lambda and DynamoDB`,
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
