/**
 * What a CodeBuild build means for a command stage, read without the CodeBuild client (types
 * only): its status as a TestRunStatus, and its "Build State Change" event as a completion. The
 * build-events function reads events with this file alone, so its bundle requires no CodeBuild
 * client (esbuild keeps every external `require` a bundled module makes).
 *
 * The log tail is the failed phase's context message plus a link to the CloudWatch Logs stream:
 * reading the log events would need logs:GetLogEvents and another SDK client for one field.
 */
import type { Build, BuildPhase } from '@aws-sdk/client-codebuild';
import * as z from 'zod/mini';
import '../../contract/zod-english';
import { TEST_BUILD_ENV } from '../../contract/runtime-env';
import { InvalidBuildEventError, readBuildEvent } from '../core/build-completion';
import type { BuildCompletion, TestRunStatus } from '../core/ports';

/** Phases that prepare the build: a failure there is infrastructure, not a verdict of the command. */
const SETUP_PHASES = new Set(['SUBMITTED', 'QUEUED', 'PROVISIONING', 'DOWNLOAD_SOURCE', 'INSTALL', 'PRE_BUILD']);

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
        return {
          state: 'ERROR',
          status: 'FAILED',
          message: `${failed.phaseType} phase failed: ${logSummary(build, failed)}`,
        };
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

/**
 * The part of CodeBuild's "Build State Change" event (EventBridge, delivered to the build-events
 * queue) the completion path reads. The build's environment variables name the job it ran for.
 */
const codeBuildStateChange = z.object({
  source: z.literal('aws.codebuild'),
  'detail-type': z.literal('CodeBuild Build State Change'),
  detail: z.object({
    'build-status': z.string(),
    'build-id': z.string().check(z.minLength(1)),
    'additional-information': z.optional(
      z.object({
        environment: z.optional(
          z.object({
            'environment-variables': z.optional(z.array(z.object({ name: z.string(), value: z.optional(z.string()) }))),
          }),
        ),
        phases: z.optional(
          z.array(
            z.object({
              'phase-type': z.string(),
              'phase-status': z.optional(z.string()),
              'phase-context': z.optional(z.array(z.string())),
            }),
          ),
        ),
        logs: z.optional(
          z.object({
            'deep-link': z.optional(z.string()),
            'group-name': z.optional(z.string()),
            'stream-name': z.optional(z.string()),
          }),
        ),
      }),
    ),
  }),
});

/** The build id of a build ARN (`arn:...:build/<project>:<uuid>` -> `<project>:<uuid>`), as StartBuild returns it. */
export function buildIdFromArn(arn: string): string {
  const at = arn.indexOf(':build/');
  return at >= 0 ? arn.slice(at + ':build/'.length) : arn;
}

/**
 * A CodeBuild "Build State Change" event as a completion; undefined while the build is in progress.
 * Throws InvalidBuildEventError for anything else (the consumer moves it to its DLQ).
 */
export function parseCodeBuildEvent(body: string): BuildCompletion | undefined {
  const { detail } = readBuildEvent(body, codeBuildStateChange, 'a CodeBuild Build State Change event');
  const info = detail['additional-information'];
  const build: Build = {
    id: buildIdFromArn(detail['build-id']),
    buildStatus: detail['build-status'] as Build['buildStatus'],
    phases: info?.phases?.map((p) => ({
      phaseType: p['phase-type'] as BuildPhase['phaseType'],
      phaseStatus: p['phase-status'] as BuildPhase['phaseStatus'],
      contexts: p['phase-context']?.filter((c) => c.replace(/[:\s]/g, '') !== '').map((message) => ({ message })),
    })),
    logs: {
      deepLink: info?.logs?.['deep-link'],
      groupName: info?.logs?.['group-name'],
      streamName: info?.logs?.['stream-name'],
    },
  };
  const status = buildStatus(build);
  if (status.state === 'RUNNING') return undefined;
  const variables = new Map((info?.environment?.['environment-variables'] ?? []).map((v) => [v.name, v.value ?? '']));
  const variable = (name: string): string => {
    const value = variables.get(name);
    if (!value)
      throw new InvalidBuildEventError(
        `build ${build.id} carries no ${name}: not a build an agent-jobs command stage started`,
      );
    return value;
  };
  return {
    buildId: build.id as string,
    jobId: variable(TEST_BUILD_ENV.jobId),
    jobType: variable(TEST_BUILD_ENV.jobType),
    sha: variable(TEST_BUILD_ENV.commitSha),
    status,
  };
}
