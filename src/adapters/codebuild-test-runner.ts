/**
 * The command runner on AWS CodeBuild. The project is a NO_SOURCE project whose buildspec clones
 * REPO_URL, checks out COMMIT_SHA and runs TEST_COMMAND in its build phase
 * (contract/runtime-env.ts TEST_BUILD_ENV). Nothing polls a build: its end comes back as a
 * "CodeBuild Build State Change" event (codebuild-builds.ts reads it on the build-events queue),
 * and `describe` answers the reconciler for many builds in one BatchGetBuilds; `stop` stops the
 * build of a cancelled job (the reconciler's StopBuild). The build's checkout credential travels
 * as references to a checkout secret (build-checkout.ts), never as a value.
 */
import {
  BatchGetBuildsCommand,
  ListBuildsForProjectCommand,
  StartBuildCommand,
  StopBuildCommand,
  type CodeBuildClient,
  type StartBuildCommandOutput,
} from '@aws-sdk/client-codebuild';
import { MAX_BUILD_TIMEOUT_MINUTES } from '../../contract/job-types';
import { TEST_BUILD_ENV } from '../../contract/runtime-env';
import { errorName, limitFrom } from '../core/errors';
import { buildEnvironment, buildIdempotencyToken } from '../core/jobs/command-stage';
import type { BuildFinder, BuildStopper, CommandRun, TestRunner, TestRunStatus } from '../core/ports';
import type { BuildCheckout } from './build-checkout';
import { buildStatus } from './codebuild-builds';
/** CodeBuild's shortest build timeout; the longest is the contract's (MAX_BUILD_TIMEOUT_MINUTES). */
const MIN_TIMEOUT_MINUTES = 5;
const MAX_TIMEOUT_MINUTES = MAX_BUILD_TIMEOUT_MINUTES;
/** BatchGetBuilds takes at most this many ids. */
export const MAX_BUILDS_PER_REQUEST = 100;

/**
 * StartBuild's answers that mean "not now": the account's (or the project's) concurrent-build
 * quota is reached, or the API throttles. A build frees up when a running one ends, which nobody
 * announces, so the job waits on the pipeline's quota back-off (RetryAfterError without a time).
 */
const QUOTA_ERRORS = new Set(['AccountLimitExceededException', 'ThrottlingException', 'TooManyRequestsException']);

/** CodeBuild answered without the build it was asked about. */
export class BuildNotFoundError extends Error {
  override readonly name = 'BuildNotFoundError';
}

/**
 * The idempotency token only covers 5 minutes, less than a crashed attempt's message takes to come
 * back: a crash between StartBuild and recording the build id is covered by `findBuild`, which the
 * stage calls only in that case.
 */
export class CodeBuildTestRunner implements TestRunner, BuildFinder, BuildStopper {
  constructor(
    private readonly client: CodeBuildClient,
    private readonly projectName: string,
    /** The checkout credential of each build; absent where nothing starts builds (the reconciler). */
    private readonly checkout?: BuildCheckout,
  ) {}

  async start(run: CommandRun): Promise<{ buildId: string }> {
    const env = buildEnvironment(run);
    const credential = this.checkout ? await this.checkout.environmentFor(run.job.pin.repoUrl) : [];
    let out: StartBuildCommandOutput;
    try {
      out = await this.client.send(
        new StartBuildCommand({
          projectName: this.projectName,
          idempotencyToken: buildIdempotencyToken(run),
          environmentVariablesOverride: [
            ...Object.entries(env).map(([name, value]) => ({ name, value, type: 'PLAINTEXT' as const })),
            ...credential,
          ],
          timeoutInMinutesOverride: timeoutMinutes(run.timeoutSeconds),
        }),
      );
    } catch (error) {
      throw limitFrom(error, QUOTA_ERRORS, 'build-quota', `CodeBuild refused a build of ${this.projectName} for now`);
    }
    const buildId = out.build?.id;
    if (!buildId) throw new BuildNotFoundError(`StartBuild on ${this.projectName} returned no build id`);
    return { buildId };
  }

  /**
   * The run's build among the project's 100 most recent (its JOB_ID, JOB_RUN and JOB_RUN_KEY
   * variables: never an earlier job's of the same id and run number), if any:
   * one ListBuildsForProject and one BatchGetBuilds. The crashed attempt started it minutes ago.
   */
  async findBuild(run: Pick<CommandRun, 'job' | 'run' | 'key'>): Promise<string | undefined> {
    const list = await this.client.send(
      new ListBuildsForProjectCommand({ projectName: this.projectName, sortOrder: 'DESCENDING' }),
    );
    const ids = (list.ids ?? []).slice(0, MAX_BUILDS_PER_REQUEST);
    if (ids.length === 0) return undefined;
    const { builds } = await this.client.send(new BatchGetBuildsCommand({ ids }));
    const wanted: Record<string, string> = {
      [TEST_BUILD_ENV.jobId]: run.job.jobId,
      [TEST_BUILD_ENV.run]: String(run.run),
      [TEST_BUILD_ENV.runKey]: run.key,
    };
    const match = builds?.find((b) =>
      Object.entries(wanted).every(([name, value]) =>
        b.environment?.environmentVariables?.some((v) => v.name === name && v.value === value),
      ),
    );
    return match?.id;
  }

  /** The state of up to 100 builds in one BatchGetBuilds; builds CodeBuild does not know are absent. */
  async describe(buildIds: readonly string[]): Promise<Map<string, TestRunStatus>> {
    if (buildIds.length > MAX_BUILDS_PER_REQUEST)
      throw new RangeError(`describe takes at most ${MAX_BUILDS_PER_REQUEST} build ids, got ${buildIds.length}`);
    const statuses = new Map<string, TestRunStatus>();
    if (buildIds.length === 0) return statuses;
    const out = await this.client.send(new BatchGetBuildsCommand({ ids: [...buildIds] }));
    for (const build of out.builds ?? []) if (build.id) statuses.set(build.id, buildStatus(build));
    return statuses;
  }

  /**
   * One StopBuild. CodeBuild answers a build that has ended already with the build as it is (no
   * error), and one it does not know with ResourceNotFoundException: in both there is nothing to stop.
   */
  async stop(buildId: string): Promise<void> {
    try {
      await this.client.send(new StopBuildCommand({ id: buildId }));
    } catch (error) {
      if (errorName(error) !== 'ResourceNotFoundException') throw error;
    }
  }
}

export function timeoutMinutes(seconds: number): number {
  return Math.min(MAX_TIMEOUT_MINUTES, Math.max(MIN_TIMEOUT_MINUTES, Math.ceil(seconds / 60)));
}
