/**
 * The build-reconciler function's dependencies on AWS: the build-completion path's (aws.ts) and the
 * CodeBuild runner, of which it uses `describe` (one BatchGetBuilds per run) only.
 */
import type { ReconcilerDeps } from '../core/build-reconciler';
import { awsCompletionDeps, codeBuildTestRunner } from './aws';

export function awsReconcilerDeps(env: NodeJS.ProcessEnv = process.env): ReconcilerDeps {
  return { ...awsCompletionDeps(env), runner: codeBuildTestRunner(env) };
}
