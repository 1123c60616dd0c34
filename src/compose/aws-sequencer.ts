/**
 * The sequencer's dependencies on AWS (the ordered lane's worker, deployed as the apply-patch
 * function): the pipeline's (aws.ts) plus the git remote, its credentials, the claim-checked diffs
 * and the stage queues it forwards to.
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { awsGitHostPolicy } from '../../contract/git-remotes';
import { JOB_TYPES, type StagedJobType } from '../../contract/job-types';
import { ENV, stageQueueUrlEnv } from '../../contract/runtime-env';
import { applyPatchProcessor } from '../core/jobs/apply-patch';
import type { DiffReader } from '../core/ports';
import type { SequencerDeps } from '../core/sequencer';
import type { IsomorphicGitWorkspace } from '../adapters/git';
import { logger } from '../adapters/powertools';
import { awsClientConfig, awsPipelineDeps, githubApiUrlEnv, requireEnv } from './aws';
import { onFirstUse, requireSeparateFile } from './first-use';

// Loaded when a job's diff was claim-checked, the only use of S3 here (aws.ts says why).
const loadS3 = (): typeof import('@aws-sdk/client-s3') => require('@aws-sdk/client-s3');
const loadDiffReader = (): typeof import('../adapters/diff-reader') => require('../adapters/diff-reader');
/**
 * The git engine's file in the function's asset, set by the bundling (the catalog's SEQUENCER
 * `separateFiles`); undefined when this runs from the sources.
 */
declare const GIT_ENGINE_FILE: string | undefined;
// The git engine (isomorphic-git, with zlib, http and https, and the git credentials from Secrets
// Manager) loads at the first git call, as the SDK clients do: forwarding a staged job pinned to a
// known head, a duplicate, a skip never make one. Bundled, it is a file of its own, so a cold start
// does not even parse it; esbuild drops the branch not taken, and the module with it.
const loadGitEngine = (): typeof import('./aws-git-engine') =>
  typeof GIT_ENGINE_FILE === 'string'
    ? (requireSeparateFile(GIT_ENGINE_FILE) as typeof import('./aws-git-engine'))
    : require('./aws-git-engine');

/** Stage queue URLs from STAGE_QUEUE_URL_<TYPE>, one per staged job type of the catalog. */
export function stageQueueUrlsFromEnv(read: (name: string) => string): Record<StagedJobType, string> {
  const staged = (Object.keys(JOB_TYPES) as (keyof typeof JOB_TYPES)[]).filter(
    (t): t is StagedJobType => JOB_TYPES[t].lane === 'staged',
  );
  return Object.fromEntries(staged.map((type) => [type, read(stageQueueUrlEnv(type))])) as Record<
    StagedJobType,
    string
  >;
}

/** Lambda's writable scratch space. */
export const SEQUENCER_WORK_ROOT = path.join(os.tmpdir(), 'agent-jobs');
/**
 * Idle workspace repositories a warm container keeps in /tmp: half of Lambda's default 512 MB of
 * ephemeral storage, the other half left for the repositories of the jobs running.
 */
export const SEQUENCER_REPO_CACHE_BYTES = 256 * 2 ** 20;

export function awsSequencerDeps(env: NodeJS.ProcessEnv = process.env): SequencerDeps {
  const read = (name: string) => requireEnv(name, env);
  const gitCredentialsArn = read(ENV.gitCredentialsSecretArn);
  const githubApiUrl = githubApiUrlEnv(env);
  const git = onFirstUse<IsomorphicGitWorkspace>(() =>
    loadGitEngine().awsGitEngine({
      gitCredentialsArn,
      githubApiUrl,
      clientConfig: awsClientConfig(env),
      workRoot: SEQUENCER_WORK_ROOT,
      cacheBytes: SEQUENCER_REPO_CACHE_BYTES,
      logger,
    }),
  );
  const diffBucket = read(ENV.diffBucket);
  const diffStore = onFirstUse<DiffReader>(() => {
    const s3 = new (loadS3().S3Client)({ ...awsClientConfig(env), forcePathStyle: Boolean(env['AWS_ENDPOINT_URL']) });
    return new (loadDiffReader().S3DiffReader)(s3, diffBucket);
  });
  return {
    ...awsPipelineDeps('sequencer', env),
    ordered: { apply_patch: applyPatchProcessor({ diffStore, git }) },
    git,
    stageQueueUrls: stageQueueUrlsFromEnv(read),
    // Unset (no gitHosts configured): every host is refused, with a reason that says so.
    gitHosts: awsGitHostPolicy(env[ENV.gitHosts]),
  };
}
