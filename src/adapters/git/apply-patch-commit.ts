/**
 * apply_patch's side effect: one commit on the workspace branch carrying the job's trailer, pushed
 * fast-forward only. Idempotent in the repository itself (docs/design.md "Processing rules" 3): a
 * redelivery finds its trailer commit and returns it; the same base + diff + jobId always produce
 * the same commit hash (author and committer time are the job's createdAt).
 *
 * With a repository cache (repo-cache.ts) a job starts from the workspace's repository as the last
 * job left it: it asks the remote for the branch head first and fetches only when that commit is
 * missing, so whatever the cache holds, the job works on the remote's head. What it fetches, cold or
 * warm, is what its patch reads, by id, where the remote allows it (branch-fetch.ts).
 */
import * as fs from 'node:fs';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import * as git from 'isomorphic-git';
import { Errors, type HttpClient } from 'isomorphic-git';
import { PermanentJobError } from '../../core/errors';
import type { JobLogger, PatchCommitRequest, PatchCommitResult } from '../../core/ports';
import { hasJobTrailer, preparePatchCommit } from '../../core/patch';
import {
  fetchAncestors,
  fetchMissing,
  locateBranch,
  refreshBranch,
  syncBranch,
  type BranchSession,
} from './branch-fetch';
import { GitObjectStore, ObjectNotFoundError, UnsafeTreeEntryError } from './object-store';
import { pushPack, type ReceivePackAdvertisement } from './receive-pack';
import { classifyRemoteError, remoteOptions, type GitAuth } from './remote';
import type { RepoCache, RepoLease } from './repo-cache';
import { applyOperations, historyTreeLevels, touchedPaths } from './tree-editor';

/** The port's request plus what the adapter brings: credentials and scratch space. */
export interface ApplyPatchCommitInput extends PatchCommitRequest {
  readonly auth?: GitAuth;
  /** Without a cache: parent of the job's scratch repository, made inside it and removed afterwards. */
  readonly workDir: string;
}

export type ApplyPatchCommitResult = PatchCommitResult;

export interface ApplyPatchOptions {
  /**
   * First-parent commits searched for the job's trailer when no baseSha bounds the search. Why a
   * bound is safe: a workspace's jobs run one at a time (the workspace cursor), so a job that is
   * delivered again finds its own commit at the head, or under commits other writers pushed since
   * (the platform pushes none before the job is done). @default 100
   */
  readonly searchDepth?: number;
  /** Commits fetched at first (without their trees where the remote filters); the history is deepened only when the search needs it. @default 10 */
  readonly fetchDepth?: number;
  readonly logger?: JobLogger;
  /** HTTP client for the remote. @default isomorphic-git's Node client */
  readonly http?: HttpClient;
  /** Keeps each workspace's repository between jobs. @default none: every job starts from an empty repository */
  readonly cache?: RepoCache;
}

/** One job's view of the remote branch (branch-fetch.ts), and how far it searches for the trailer. */
interface Session extends BranchSession {
  readonly searchDepth: number;
}

/** The cache key of a workspace's repository: its remote and branch. */
export function repoCacheKey(repoUrl: string, branch: string): string {
  return createHash('sha256').update(`${repoUrl}\n${branch}`).digest('hex').slice(0, 40);
}

export async function applyPatchCommit(
  input: ApplyPatchCommitInput,
  options: ApplyPatchOptions = {},
): Promise<ApplyPatchCommitResult> {
  // Validation is pure and comes first: a hostile patch or commit never causes a single request.
  const { operations, commit } = preparePatchCommit(input);
  const lease = options.cache
    ? await options.cache.lease(repoCacheKey(input.repoUrl, input.branch))
    : await scratchLease(input.workDir, input.jobId);
  const { gitdir } = lease;
  const session: Session = {
    gitdir,
    remote: remoteOptions(input.repoUrl, input.auth, options.http),
    branch: input.branch,
    jobId: input.jobId,
    memory: lease.memory,
    // A partial repository's promisor: what a read lacks is fetched by id.
    objects: new GitObjectStore(gitdir, lease.memory, (oids, prefetch) => fetchMissing(session, oids, prefetch)),
    searchDepth: options.searchDepth ?? 100,
    fetchDepth: options.fetchDepth ?? 10,
    // A cold repository has no tree: the top levels of the head's come with its history. A warm one
    // has most of them, and a fetch sends no `have`s, so it asks only for what preload finds missing.
    historyTreeLevels: lease.warm ? undefined : historyTreeLevels(touchedPaths(operations)),
    base: input.baseSha,
    logger: options.logger,
    measure: !lease.warm,
  };
  // The repository goes back to the cache after a normal end: a result, or a verdict on the job
  // (a permanent error) reached with every write finished. Anything else may have left it half-written.
  let keep = false;
  try {
    if (!lease.warm) {
      await git.init({ fs, gitdir, bare: true });
      // fetch needs a remote's refspec even when given a URL.
      await git.addRemote({ fs, gitdir, remote: 'origin', url: input.repoUrl });
    }
    const { head, advertised } = lease.warm ? await syncBranch(session) : await locateBranch(session);
    const existing = await findJobCommit(session, input.jobId, head, input.baseSha);
    if (existing) {
      options.logger?.info('job commit already on the branch', { jobId: input.jobId, commitSha: existing.commitSha });
      keep = true;
      return existing;
    }
    if (input.baseSha !== undefined && head !== input.baseSha) {
      throw new PermanentJobError(
        'BASE_MISMATCH',
        `branch ${input.branch} is at ${head}, not at the job's base ${input.baseSha}, and the job's commit is not on it`,
      );
    }
    const base = await session.objects.readCommit(head);
    // Only the trees on the touched paths are read and written again: no checkout, no walk of the tree.
    const tree = await applyOperations(session.objects, base.tree, operations).catch((error: unknown) => {
      throw withHead(error, head);
    });
    const commitSha = await session.objects.writeCommit({ ...commit, tree, parent: [head] });
    // Everything the remote lacks: what the patch wrote and the commit; the rest of the tree is the parent's.
    // The repository keeps the same pack, so the next job finds the commit it builds on.
    const written = session.objects.packWritten();
    await session.objects.keepPack(written);
    const result = await pushFastForward(session, {
      jobId: input.jobId,
      commitSha,
      parent: head,
      packfile: written.pack,
      advertised,
    });
    options.logger?.info(result.alreadyApplied ? 'job commit already on the branch' : 'patch committed', {
      jobId: input.jobId,
      commitSha: result.commitSha,
      files: operations.length,
      warm: lease.warm,
      fetched: session.mode ?? 'nothing',
    });
    keep = true;
    return result;
  } catch (error) {
    const classified = refusedPath(error);
    keep = classified instanceof PermanentJobError;
    throw classified;
  } finally {
    // Bytes this job added, counted as written, so the cache need not measure the repository again.
    await lease.release(keep, session.measure ? undefined : session.objects.bytesAdded);
  }
}

/**
 * Every tree entry git's verify_path() would refuse (`docs\a.md`, `...`, `git~1`) is refused on
 * reading, by the object store as by isomorphic-git. The patch's own paths pass stricter rules first
 * (core/patch/paths.ts), so this is a branch that already holds such a name: no retry reads it otherwise.
 */
function refusedPath(error: unknown): unknown {
  const name =
    error instanceof Errors.UnsafeFilepathError
      ? error.data.filepath
      : error instanceof UnsafeTreeEntryError
        ? error.entryName
        : undefined;
  if (name === undefined) return error;
  const path = JSON.stringify(name);
  return new PermanentJobError(
    'UNSAFE_PATCH',
    `the git library refuses the path ${path} as unsafe: the branch holds a name that cannot be checked out everywhere; remove it from the branch, then run the job again: agent-jobs dlq redrive <jobId>`,
    { cause: error },
  );
}

/** A patch that does not apply names the head it met: the agent writes its next patch against it. */
function withHead(error: unknown, head: string): unknown {
  if (!(error instanceof PermanentJobError) || error.repositoryData === undefined) return error;
  return new PermanentJobError(error.reason, error.message, {
    cause: error,
    repositoryData: { ...error.repositoryData, head },
  });
}

/** Without a cache: an empty repository of the job's own, removed at the end. */
async function scratchLease(workDir: string, jobId: string): Promise<RepoLease> {
  const gitdir = await mkdtemp(join(workDir, `apply-${jobId}-`));
  return { gitdir, warm: false, memory: {}, release: () => rm(gitdir, { recursive: true, force: true }) };
}

/**
 * Walks first-parent history from `head` back to `stopAt` (exclusive) or `searchDepth` commits,
 * looking for the job's trailer, and deepens the shallow history only when the walk reaches its end.
 */
async function findJobCommit(
  session: Session,
  jobId: string,
  head: string,
  stopAt: string | undefined,
): Promise<ApplyPatchCommitResult | undefined> {
  let oid: string | undefined = head;
  for (let seen = 0; oid !== undefined && oid !== stopAt && seen < session.searchDepth; seen++) {
    const commit = await readCommitDeepening(session, oid, seen);
    if (!commit) return undefined;
    const parent = commit.parent[0];
    // A job's commit always has a parent, so a root commit is never one.
    if (parent !== undefined && hasJobTrailer(commit.message, jobId))
      return { commitSha: oid, parentSha: parent, alreadyApplied: true };
    oid = parent;
  }
  return undefined;
}

async function readCommitDeepening(
  session: Session,
  oid: string,
  seen: number,
): Promise<{ message: string; parent: string[] } | undefined> {
  const read = () => session.objects.readCommit(oid);
  try {
    return await read();
  } catch (error) {
    if (!(error instanceof ObjectNotFoundError)) throw error;
  }
  // The walk reached the end of the history fetched so far: fetch more (doubling) and try again.
  await fetchAncestors(session, oid, Math.max(seen, session.fetchDepth));
  try {
    return await read();
  } catch (error) {
    if (error instanceof ObjectNotFoundError) return undefined;
    throw error;
  }
}

/**
 * Pushes `commitSha` only if the remote branch is still at `parent`: receive-pack updates the ref
 * only if it still holds the value we send (a compare-and-swap). When the branch moved, the job
 * either is there already (a twin won) or the branch diverged. When the remote refused the update
 * and the branch did not move (a protected branch, a hook), the host rejects the job.
 */
async function pushFastForward(
  session: Session,
  {
    jobId,
    commitSha,
    parent,
    packfile,
    advertised,
  }: {
    jobId: string;
    commitSha: string;
    parent: string;
    packfile: Uint8Array;
    advertised: Promise<ReceivePackAdvertisement | undefined>;
  },
): Promise<ApplyPatchCommitResult> {
  const ref = `refs/heads/${session.branch}`;
  let outcome;
  try {
    outcome = await pushPack({
      remote: session.remote,
      ref,
      oldOid: parent,
      newOid: commitSha,
      packfile,
      advertised: await advertised,
    });
  } catch (error) {
    throw classifyRemoteError(error, `push ${session.branch}`);
  }
  if (outcome.kind === 'pushed') {
    await git.writeRef({ fs, gitdir: session.gitdir, ref, value: commitSha, force: true });
    return { commitSha, parentSha: parent, alreadyApplied: false };
  }
  const head = await refreshBranch(session);
  const existing = await findJobCommit(session, jobId, head, parent);
  if (existing) return existing;
  if (outcome.kind === 'refused' && head === parent) {
    throw new PermanentJobError(
      'REJECTED_BY_TARGET',
      `push ${session.branch}: the remote refused the update and the branch is still at ${parent}: ${outcome.details}`,
    );
  }
  throw new PermanentJobError(
    'BRANCH_DIVERGED',
    `branch ${session.branch} moved from ${parent} to ${head} while the patch was applied; pushes are fast-forward only`,
  );
}
