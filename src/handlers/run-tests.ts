/**
 * The run-tests function: runs a workspace's tests at the pinned commit on CodeBuild. The processor
 * is src/core/jobs/run-tests.ts; its AWS adapters come from src/compose/aws-run-tests.ts.
 */
import { lambdaHandler } from '../compose/aws';
import { awsRunTestsDeps } from '../compose/aws-run-tests';
import { createRunTestsHandler } from '../core/jobs/run-tests';

export const handler = lambdaHandler(() => createRunTestsHandler(awsRunTestsDeps()));
