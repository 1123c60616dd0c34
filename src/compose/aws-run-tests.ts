/** The run_tests function's dependencies on AWS: the pipeline's (aws.ts) plus the CodeBuild test runner. */
import { CodeBuildClient } from '@aws-sdk/client-codebuild';
import { ENV } from '../../contract/runtime-env';
import type { RunTestsDeps } from '../core/jobs/run-tests';
import { CodeBuildTestRunner } from '../adapters/codebuild-test-runner';
import { awsClientConfig, awsPipelineDeps, requireEnv } from './aws';

export function awsRunTestsDeps(env: NodeJS.ProcessEnv = process.env): RunTestsDeps {
  return {
    ...awsPipelineDeps('stage', env),
    runner: new CodeBuildTestRunner(new CodeBuildClient(awsClientConfig(env)), requireEnv(ENV.testRunnerProject, env)),
  };
}
