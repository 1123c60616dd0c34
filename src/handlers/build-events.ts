/**
 * The build-events function: CodeBuild's "Build State Change" events (an EventBridge rule puts them
 * on the build-events queue) record each command stage's verdict. The logic is
 * src/core/build-completion.ts; its AWS adapters come from src/compose/aws-build-events.ts.
 */
import { lambdaHandler } from '../compose/aws';
import { awsBuildEventsDeps } from '../compose/aws-build-events';
import { createBuildEventsHandler } from '../core/build-completion';

export const handler = lambdaHandler(() => createBuildEventsHandler(awsBuildEventsDeps()));
