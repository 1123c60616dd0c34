/**
 * TestRunner on AWS CodeBuild. The project is a NO_SOURCE project whose buildspec clones REPO_URL,
 * checks out COMMIT_SHA and runs TEST_COMMAND in its build phase (contract/runtime-env.ts TEST_BUILD_ENV).
 *
 * The log tail is the failed phase's context message plus a link to the CloudWatch Logs stream:
 * reading the log events would need logs:GetLogEvents and another SDK client for one field.
 */
import {
  BatchGetBuildsCommand,
  ListBuildsForProjectCommand,
  StartBuildCommand,
  type Build,
  type BuildPhase,
  type CodeBuildClient,
} from '@aws-sdk/client-codebuild';
import type { StageMessage } from '../core/envelope';
import type { TestRunner, TestRunStatus, BuildFinder } from '../core/ports';
import { TEST_BUILD_ENV } from '../../contract/runtime-env';
import { buildEnvironment, buildIdempotencyToken } from '../core/jobs/run-tests';

/** Phases that prepare the build: a failure there is infrastructure, not a test verdict. */
const SETUP_PHASES = new Set(['SUBMITTED', 'QUEUED', 'PROVISIONING', 'DOWNLOAD_SOURCE', 'INSTALL', 'PRE_BUILD']);
/** CodeBuild accepts build timeouts of 5 to 2160 minutes. */
const MIN_TIMEOUT_MINUTES = 5;
const MAX_TIMEOUT_MINUTES = 2160;
/** Pages of 100 most recent builds searched for a job's unrecorded build (needs ListBuildsForProject). */
const FIND_PAGES = 3;

/** CodeBuild answered without the build it was asked about. */
export class BuildNotFoundError extends Error {
  override readonly name = 'BuildNotFoundError';
}

/**
 * The idempotency token only covers 5 minutes, less than a lease: a crash between StartBuild and
 * recording the build id is covered by `findBuild`, which the handler calls only in that case.
 */
export class CodeBuildTestRunner implements TestRunner, BuildFinder {
  constructor(
    private readonly client: CodeBuildClient,
    private readonly projectName: string,
  ) {}

  async start(job: StageMessage<'run_tests'>): Promise<{ buildId: string }> {
    const env = buildEnvironment(job);
    const timeout = job.payload.timeoutSeconds;
    const out = await this.client.send(
      new StartBuildCommand({
        projectName: this.projectName,
        idempotencyToken: buildIdempotencyToken(job.jobId),
        environmentVariablesOverride: Object.entries(env).map(([name, value]) => ({ name, value, type: 'PLAINTEXT' })),
        ...(timeout === undefined ? {} : { timeoutInMinutesOverride: timeoutMinutes(timeout) }),
      }),
    );
    const buildId = out.build?.id;
    if (!buildId) throw new BuildNotFoundError(`StartBuild on ${this.projectName} returned no build id`);
    return { buildId };
  }

  /** The project's most recent build started for this job (its JOB_ID variable), if any. */
  async findBuild(job: StageMessage<'run_tests'>): Promise<string | undefined> {
    let nextToken: string | undefined;
    for (let page = 0; page < FIND_PAGES; page++) {
      const list = await this.client.send(new ListBuildsForProjectCommand({ projectName: this.projectName, sortOrder: 'DESCENDING', nextToken }));
      const ids = list.ids ?? [];
      if (ids.length > 0) {
        const { builds } = await this.client.send(new BatchGetBuildsCommand({ ids }));
        const match = builds?.find((b) => b.environment?.environmentVariables?.some((v) => v.name === TEST_BUILD_ENV.jobId && v.value === job.jobId));
        if (match?.id) return match.id;
      }
      nextToken = list.nextToken;
      if (!nextToken) return undefined;
    }
    return undefined;
  }

  async poll(buildId: string): Promise<TestRunStatus> {
    const out = await this.client.send(new BatchGetBuildsCommand({ ids: [buildId] }));
    const build = out.builds?.find((b) => b.id === buildId);
    if (!build) throw new BuildNotFoundError(`build ${buildId} not found`);
    return buildStatus(build);
  }
}

export function timeoutMinutes(seconds: number): number {
  return Math.min(MAX_TIMEOUT_MINUTES, Math.max(MIN_TIMEOUT_MINUTES, Math.ceil(seconds / 60)));
}

/** Maps a CodeBuild build to a TestRunStatus. Exported for the unit tests. */
export function buildStatus(build: Build): TestRunStatus {
  const durationMs = build.startTime && build.endTime ? build.endTime.getTime() - build.startTime.getTime() : undefined;
  const timing = durationMs === undefined ? {} : { durationMs };
  const failed = build.phases?.find((p) => p.phaseStatus !== undefined && p.phaseStatus !== 'SUCCEEDED');
  switch (build.buildStatus) {
    case undefined:
    case 'IN_PROGRESS':
      return { state: 'RUNNING' };
    case 'SUCCEEDED':
      return { state: 'PASSED', exitCode: 0, logTail: logSummary(build, undefined), ...timing };
    case 'FAILED':
      if (failed?.phaseType !== undefined && SETUP_PHASES.has(failed.phaseType)) {
        return { state: 'ERROR', status: 'FAILED', message: `${failed.phaseType} phase failed: ${logSummary(build, failed)}` };
      }
      return { state: 'FAILED', exitCode: exitCode(failed), logTail: logSummary(build, failed), ...timing };
    default:
      // FAULT, TIMED_OUT, STOPPED: the build ended without a verdict.
      return { state: 'ERROR', status: build.buildStatus, message: logSummary(build, failed) };
  }
}

/** CodeBuild reports the command's exit in the phase context: "... Reason: exit status 1". */
function exitCode(phase: BuildPhase | undefined): number | null {
  for (const context of phase?.contexts ?? []) {
    const match = /exit status (\d+)/.exec(context.message ?? '');
    if (match?.[1] !== undefined) return Number(match[1]);
  }
  return null;
}

function logSummary(build: Build, failed: BuildPhase | undefined): string {
  const lines: string[] = [];
  for (const context of failed?.contexts ?? []) {
    const text = [context.statusCode, context.message].filter(Boolean).join(': ');
    if (text) lines.push(`${failed?.phaseType ?? 'phase'}: ${text}`);
  }
  const logs = build.logs;
  if (logs?.deepLink) lines.push(`logs: ${logs.deepLink}`);
  else if (logs?.groupName && logs.streamName) lines.push(`logs: ${logs.groupName}/${logs.streamName}`);
  return lines.join('\n');
}
