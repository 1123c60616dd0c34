/**
 * CodeBuild "Build State Change" events as EventBridge puts them on the build-events queue, for
 * tests (CodeBuild has no local stand-in). The shape follows the event CodeBuild documents (the
 * fields src/adapters/codebuild-test-runner.ts reads, plus a few it ignores).
 */
import { randomUUID } from 'node:crypto';

export interface BuildEventOptions {
  readonly buildId: string;
  readonly status: string;
  readonly jobId: string;
  readonly jobType: string;
  readonly sha: string;
  readonly run?: number;
  /** A phase that did not succeed, with its context line ("CODE: message"). */
  readonly failedPhase?: { readonly type: string; readonly context: string };
}

export function codeBuildStateChange(options: BuildEventOptions) {
  const [project] = options.buildId.split(':');
  const ok = (type: string) => ({
    'phase-type': type,
    'phase-status': 'SUCCEEDED',
    'phase-context': [': '],
    'start-time': 'Dec 1, 2026 9:00:00 AM',
    'duration-in-seconds': 1,
  });
  const phases = ['SUBMITTED', 'QUEUED', 'PROVISIONING', 'DOWNLOAD_SOURCE', 'INSTALL', 'PRE_BUILD', 'BUILD'].map(
    (type) =>
      options.failedPhase?.type === type
        ? { ...ok(type), 'phase-status': 'FAILED', 'phase-context': [options.failedPhase.context] }
        : ok(type),
  );
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'CodeBuild Build State Change',
    source: 'aws.codebuild',
    account: '123456789012',
    time: '2026-12-01T09:05:00Z',
    region: 'eu-west-1',
    resources: [`arn:aws:codebuild:eu-west-1:123456789012:build/${options.buildId}`],
    detail: {
      'build-status': options.status,
      'project-name': project,
      'build-id': `arn:aws:codebuild:eu-west-1:123456789012:build/${options.buildId}`,
      'current-phase': 'COMPLETED',
      'current-phase-context': '[: ]',
      version: '1',
      'additional-information': {
        'build-complete': options.status !== 'IN_PROGRESS',
        initiator: 'agent-jobs-run-tests',
        'build-start-time': 'Dec 1, 2026 9:00:00 AM',
        'timeout-in-minutes': 60,
        'queued-timeout-in-minutes': 60,
        source: { type: 'NO_SOURCE' },
        environment: {
          image: 'aws/codebuild/amazonlinux-aarch64-standard:3.0',
          'privileged-mode': false,
          'compute-type': 'BUILD_GENERAL1_SMALL',
          type: 'ARM_CONTAINER',
          'environment-variables': [
            { name: 'REPO_URL', type: 'PLAINTEXT', value: 'https://git.example/acme/widgets.git' },
            { name: 'COMMIT_SHA', type: 'PLAINTEXT', value: options.sha },
            { name: 'TEST_COMMAND', type: 'PLAINTEXT', value: 'npm test' },
            { name: 'JOB_ID', type: 'PLAINTEXT', value: options.jobId },
            { name: 'JOB_TYPE', type: 'PLAINTEXT', value: options.jobType },
            { name: 'JOB_RUN', type: 'PLAINTEXT', value: String(options.run ?? 0) },
          ],
        },
        logs: {
          'group-name': '/agent-jobs/tests',
          'stream-name': 'b',
          'deep-link': `https://console.aws.amazon.com/cloudwatch/home#logsV2:log-groups/${project}`,
        },
        phases,
      },
    },
  };
}
