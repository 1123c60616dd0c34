/**
 * The build-reconciler function's dependencies on AWS: the build-completion path's (aws.ts) and the
 * CodeBuild runner, of which it uses `describe` (one BatchGetBuilds per run) only.
 */
import { CodeBuildClient } from '@aws-sdk/client-codebuild';
import { ENV } from '../../contract/runtime-env';
import type { ReconcilerDeps } from '../core/build-reconciler';
import { CodeBuildTestRunner } from '../adapters/codebuild-test-runner';
import { awsClientConfig, awsCompletionDeps, requireEnv } from './aws';

export function awsReconcilerDeps(env: NodeJS.ProcessEnv = process.env): ReconcilerDeps {
  return { ...awsCompletionDeps(env), runner: new CodeBuildTestRunner(new CodeBuildClient(awsClientConfig(env)), requireEnv(ENV.testRunnerProject, env)) };
}
