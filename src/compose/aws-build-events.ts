/**
 * The build-events function's dependencies on AWS: the build-completion path's (aws.ts), its own
 * DLQ, and the reader of CodeBuild's "Build State Change" events (no CodeBuild client: it reads no build).
 */
import { ENV } from '../../contract/runtime-env';
import type { BuildEventsDeps } from '../core/build-completion';
import { parseCodeBuildEvent } from '../adapters/codebuild-builds';
import { awsCompletionDeps, requireEnv, sqsQueueOps } from './aws';

export function awsBuildEventsDeps(env: NodeJS.ProcessEnv = process.env): BuildEventsDeps {
  return {
    ...awsCompletionDeps(env),
    queueOps: sqsQueueOps({ dlqUrl: requireEnv(ENV.dlqUrl, env) }),
    parse: parseCodeBuildEvent,
  };
}
