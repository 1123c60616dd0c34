/**
 * The build-reconciler function, on a schedule: completes command-stage jobs whose build's
 * completion event never came, and reports verdicts left unreported. The logic is
 * src/core/build-reconciler.ts; its AWS adapters come from src/compose/aws-build-reconciler.ts.
 */
import { lambdaHandler } from '../compose/aws';
import { awsReconcilerDeps } from '../compose/aws-build-reconciler';
import { reconcileBuilds } from '../core/build-reconciler';

export const handler = lambdaHandler(() => {
  const deps = awsReconcilerDeps();
  return async (_event: unknown) => {
    await reconcileBuilds(deps);
  };
});
