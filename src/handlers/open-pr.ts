/**
 * The open-pr function: opens (or finds) the workspace branch's pull request on GitHub. The
 * processor is src/core/jobs/open-pr.ts; its AWS adapters come from src/compose/aws-open-pr.ts.
 */
import { lambdaHandler } from '../compose/aws';
import { awsOpenPrDeps } from '../compose/aws-open-pr';
import { createOpenPrHandler } from '../core/jobs/open-pr';

export const handler = lambdaHandler(() => createOpenPrHandler(awsOpenPrDeps()));
