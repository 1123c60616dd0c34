/**
 * A command stage's function on AWS (run-tests, ...): the pipeline's dependencies (aws.ts) plus the
 * CodeBuild command runner. STAGE_JOB_TYPE says which command stage of the catalog it serves.
 */
import { commandStageOf, type CommandJobType } from '../../contract/job-types';
import { ENV } from '../../contract/runtime-env';
import type { BuildCheckout } from '../adapters/build-checkout';
import { ConfigurationError } from '../core/errors';
import type { CommandStageDeps } from '../core/jobs/command-stage';
import {
  awsClientConfig,
  awsPipelineDeps,
  githubApiUrlEnv,
  codeBuildTestRunner,
  positiveIntEnv,
  requireEnv,
} from './aws';
import { onFirstUse, requireSeparateFile } from './first-use';

/**
 * The build checkout's file in the function's asset, set by the bundling (the catalog's
 * commandStage `separateFiles`); undefined when this runs from the sources.
 */
declare const BUILD_CHECKOUT_FILE: string | undefined;
// Secrets Manager, auth-app and Octokit load at the first build start, from a file of their own.
const loadBuildCheckout = (): typeof import('./aws-build-checkout') =>
  typeof BUILD_CHECKOUT_FILE === 'string'
    ? (requireSeparateFile(BUILD_CHECKOUT_FILE) as typeof import('./aws-build-checkout'))
    : require('./aws-build-checkout');

/** The command stage a function serves (STAGE_JOB_TYPE), checked against the catalog. */
export function commandJobTypeFromEnv(env: NodeJS.ProcessEnv = process.env): CommandJobType {
  const type = requireEnv(ENV.stageJobType, env);
  if (!commandStageOf(type))
    throw new ConfigurationError(
      `environment variable ${ENV.stageJobType} is "${type}", which is not a command stage of the catalog`,
    );
  return type as CommandJobType;
}

export function awsCommandStageDeps(env: NodeJS.ProcessEnv = process.env): CommandStageDeps {
  const gitReadCredentialsArn = requireEnv(ENV.gitReadCredentialsSecretArn, env);
  const secretPrefix = requireEnv(ENV.checkoutSecretPrefix, env);
  const githubApiUrl = githubApiUrlEnv(env);
  const checkout = onFirstUse<BuildCheckout>(() =>
    loadBuildCheckout().awsBuildCheckout({
      gitReadCredentialsArn,
      secretPrefix,
      githubApiUrl,
      clientConfig: awsClientConfig(env),
    }),
  );
  return {
    ...awsPipelineDeps('stage', env),
    runner: codeBuildTestRunner(env, checkout),
    defaultTimeoutSeconds: positiveIntEnv(ENV.buildTimeoutMinutes, env) * 60,
  };
}
