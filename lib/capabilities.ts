/**
 * Turns the catalog's `needs` (contract/job-types.ts Capability) into grants: each capability is
 * one least-privilege permission plus the environment variable that names its resource, granted
 * together so they cannot drift. A new capability in the catalog fails to compile here until it
 * has a binding.
 */
import { Annotations } from 'aws-cdk-lib';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type { Capability } from '../contract/job-types';
import { contentShare, GITHUB_CONTENT_LIMITS } from '../contract/limits';
import { ENV } from '../contract/runtime-env';
import { acknowledgeWildcard, nagArnRef } from './nag';
import { grantSecretRead, type PlatformSecret } from './secrets';
import type { TestRunner } from './constructs/test-runner';
import type { Worker } from './constructs/worker';

/** The shared resources a capability can reach. */
export interface CapabilityResources {
  /** The push credential: the sequencer's only (test builds get a read-only one of their own). */
  readonly gitCredentials: PlatformSecret;
  /** The read-only credential the command stages turn into each build's checkout secret. */
  readonly gitReadCredentials: PlatformSecret;
  readonly githubToken: PlatformSecret;
  readonly githubApiUrl: string;
  /** Content-creating GitHub requests an hour, all containers together (config githubContentRequestsPerHour). */
  readonly githubContentRequestsPerHour: number;
  /** The git hosts a worker holding the push credential may dial (the configuration's allow-list). */
  readonly gitHosts: readonly string[];
  readonly diffBucket: s3.IBucket;
  readonly testRunner: TestRunner;
}

/** `concurrency`: the most invocations of the worker at once (its event source mapping's MaximumConcurrency). */
type Binding = (worker: Worker, resources: CapabilityResources, concurrency: number) => void;

/** Read access to a secret, and its ARN (never its value) in the environment. */
function bindSecret(worker: Worker, ref: PlatformSecret, envVar: string): void {
  grantSecretRead(worker.role, ref);
  worker.function.addEnvironment(envVar, ref.secret.secretArn);
}

const BINDINGS: Record<Capability, Binding> = {
  gitCredentials: (worker, r) => {
    bindSecret(worker, r.gitCredentials, ENV.gitCredentialsSecretArn);
    // Where a GitHub App in the secret mints its installation tokens.
    worker.function.addEnvironment(ENV.githubApiUrl, r.githubApiUrl);
    // Unset when none is configured: the worker then refuses every host (HOST_NOT_ALLOWED).
    if (r.gitHosts.length > 0) worker.function.addEnvironment(ENV.gitHosts, r.gitHosts.join(','));
  },
  githubToken: (worker, r, concurrency) => {
    bindSecret(worker, r.githubToken, ENV.githubTokenSecretArn);
    worker.function.addEnvironment(ENV.githubApiUrl, r.githubApiUrl);
    // Each container's share of GitHub's content-creation limit.
    const share = contentShare(concurrency, r.githubContentRequestsPerHour);
    const limit = {
      perMinute: Math.min(r.githubContentRequestsPerHour, GITHUB_CONTENT_LIMITS.perMinute),
      perHour: r.githubContentRequestsPerHour,
    };
    if (share.perMinute * concurrency > limit.perMinute || share.perHour * concurrency > limit.perHour) {
      Annotations.of(worker).addWarningV2(
        'agent-jobs:github-content-share',
        `${concurrency} containers at once cannot share ${limit.perMinute} pull requests a minute and ${limit.perHour} an hour (one each at least): lower maxConcurrency to ${limit.perMinute} or less`,
      );
    }
    worker.function.addEnvironment(ENV.githubContentPerMinute, String(share.perMinute));
    worker.function.addEnvironment(ENV.githubContentPerHour, String(share.perHour));
  },
  diffBucketRead: (worker, r) => {
    // GetObject only (no s3:GetObject* or List* of grantRead); ListBucket on the bucket itself so a
    // missing key answers NoSuchKey, not AccessDenied, and the handler can tell bad input from a fault.
    worker.allow(['s3:GetObject'], [r.diffBucket.arnForObjects('*')]);
    worker.allow(['s3:ListBucket'], [r.diffBucket.bucketArn]);
    acknowledgeWildcard(
      worker.role,
      `Resource::${nagArnRef(r.diffBucket)}/*`,
      'Producers choose a key per job (<workspaceId>/<jobId>/<sha256>.diff): reading claim-checked diffs needs any key of the one diff bucket.',
    );
    worker.function.addEnvironment(ENV.diffBucket, r.diffBucket.bucketName);
  },
  commandRunner: (worker, r) => {
    const project = r.testRunner.project;
    // ListBuildsForProject + BatchGetBuilds find a build an earlier attempt started but never
    // recorded (a crash window), once; nothing polls a build.
    worker.allow(
      ['codebuild:StartBuild', 'codebuild:ListBuildsForProject', 'codebuild:BatchGetBuilds'],
      [project.projectArn],
    );
    worker.function.addEnvironment(ENV.testRunnerProject, project.projectName);
    worker.function.addEnvironment(ENV.buildTimeoutMinutes, String(r.testRunner.timeout.toMinutes()));
    // The build's checkout credential: read from the read-only secret (a GitHub App there mints a
    // token for the one repository), written to the repository's checkout secret, which is all
    // the build's role may read; its current version is read first and named while it serves
    // (src/adapters/build-checkout.ts). One scheduled for deletion is described and restored.
    bindSecret(worker, r.gitReadCredentials, ENV.gitReadCredentialsSecretArn);
    worker.function.addEnvironment(ENV.githubApiUrl, r.githubApiUrl);
    worker.allow(
      [
        'secretsmanager:CreateSecret',
        'secretsmanager:GetSecretValue',
        'secretsmanager:PutSecretValue',
        'secretsmanager:DescribeSecret',
        'secretsmanager:RestoreSecret',
      ],
      [r.testRunner.checkoutSecretsArn],
    );
    acknowledgeWildcard(
      worker.role,
      `Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:${r.testRunner.checkoutSecretPrefix}*`,
      "The checkout secrets are one per repository, named at run time under the stack's prefix: a command stage reads, creates and updates the one of the repository it starts a build for.",
    );
    worker.function.addEnvironment(ENV.checkoutSecretPrefix, r.testRunner.checkoutSecretPrefix);
  },
  buildStatus: (worker, r) => {
    const project = r.testRunner.project;
    worker.allow(['codebuild:BatchGetBuilds'], [project.projectArn]);
    worker.function.addEnvironment(ENV.testRunnerProject, project.projectName);
  },
  buildStop: (worker, r) => {
    // The one project's builds only: the reconciler stops the build of a job an operator cancelled
    // (decisions §33); the operator's own credentials need no CodeBuild permission for it.
    const project = r.testRunner.project;
    worker.allow(['codebuild:StopBuild'], [project.projectArn]);
    worker.function.addEnvironment(ENV.testRunnerProject, project.projectName);
  },
};

export function bindCapabilities(
  worker: Worker,
  needs: readonly Capability[],
  resources: CapabilityResources,
  concurrency = 1,
): void {
  for (const capability of needs) BINDINGS[capability](worker, resources, concurrency);
}
