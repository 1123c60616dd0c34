/**
 * A command stage's function on AWS (run-tests, ...): the pipeline's dependencies (aws.ts) plus the
 * CodeBuild command runner. STAGE_JOB_TYPE says which command stage of the catalog it serves.
 */
import { commandStageOf, type CommandJobType } from '../../contract/job-types';
import { ENV } from '../../contract/runtime-env';
import { ConfigurationError } from '../core/errors';
import type { CommandStageDeps } from '../core/jobs/command-stage';
import { awsPipelineDeps, codeBuildTestRunner, positiveIntEnv, requireEnv } from './aws';

/** The command stage a function serves (STAGE_JOB_TYPE), checked against the catalog. */
export function commandJobTypeFromEnv(env: NodeJS.ProcessEnv = process.env): CommandJobType {
  const type = requireEnv(ENV.stageJobType, env);
  if (!commandStageOf(type)) throw new ConfigurationError(`environment variable ${ENV.stageJobType} is "${type}", which is not a command stage of the catalog`);
  return type as CommandJobType;
}

export function awsCommandStageDeps(env: NodeJS.ProcessEnv = process.env): CommandStageDeps {
  return {
    ...awsPipelineDeps('stage', env),
    runner: codeBuildTestRunner(env),
    defaultTimeoutSeconds: positiveIntEnv(ENV.buildTimeoutMinutes, env) * 60,
  };
}
