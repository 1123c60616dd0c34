/**
 * The function of a command stage (run-tests, ...; STAGE_JOB_TYPE says which): starts the job's
 * build on CodeBuild and acknowledges the message. The processor is src/core/jobs/command-stage.ts;
 * its AWS adapters come from src/compose/aws-command-stage.ts.
 */
import { lambdaHandler } from '../compose/aws';
import { awsCommandStageDeps, commandJobTypeFromEnv } from '../compose/aws-command-stage';
import { createCommandStageHandler } from '../core/jobs/command-stage';

export const handler = lambdaHandler(() => createCommandStageHandler(commandJobTypeFromEnv(), awsCommandStageDeps()));
