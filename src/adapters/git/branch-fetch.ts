/**
 * How a job gets the part of the workspace branch it reads into its repository (an empty one, or
 * the cache's from an earlier job). Where the branch is always comes from the remote. What the
 * repository lacks comes one of two ways, chosen per remote at the job's first fetch:
 *
 * - by id (`partial`), where upload-pack offers protocol v2 with filters (upload-pack.ts): the
 *   head's commit with the top levels of its tree (or, when the trailer search will read them, a
 *   few ancestors without trees), then only the trees on the patch's paths and the blobs it reads
 *   (tree-editor.ts announces them a few directory levels at a time). A cold job costs what its patch touches, not what the repository holds. The
 *   repository is a partial clone as git knows one: `.promisor` packs, and the remote marked as
 *   their promisor.
 * - whole (`whole`), where it does not (an older server, filters turned off, the filter refused):
 *   isomorphic-git's shallow fetch of the branch, every tree and blob of its head. The job's log
 *   says so.
 *
 * Nothing is asked before the first fetch by id: it is sent as if the remote filtered, and only
 * when it fails does the capability probe say whether the remote filters (then the failure is the
 * job's) or not (whole mode). A host that refuses several tree levels in one request
 * (`combine:blob:none+tree:<n>`) is asked a level at a time from then on (docs/decisions.md §40).
 *
 * Each request by id is logged at debug level with what it brings.
 *
 * A cached partial repository whose remote no longer filters is not used whole: fetching into it
 * would treat its missing objects as present. The job fails as transient instead, which discards
 * the repository (repo-cache.ts keeps only normal ends), and its retry starts cold.
 */
import * as fs from 'node:fs';
import * as git from 'isomorphic-git';
import { Errors } from 'isomorphic-git';
import { PermanentJobError, TransientJobError } from '../../core/errors';
import type { JobLogger } from '../../core/ports';
import type { GitObjectStore } from './object-store';
import { RemoteAnswerError } from './pkt-line';
import { discoverReceivePack, type ReceivePackAdvertisement } from './receive-pack';
import { classifyRemoteError, notGitError, remoteArgs, type RemoteOptions } from './remote';
import {
  FilterRefusedError,
  fetchPack,
  filterOf,
  probeUploadPack,
  type FetchRequest,
  type UploadPackInfo,
} from './upload-pack';

/** One job's view of the remote branch, in a bare repository of its own. */
export interface BranchSession {
  readonly gitdir: string;
  readonly remote: RemoteOptions;
  readonly branch: string;
  readonly jobId: string;
  /** isomorphic-git's in-memory cache of the repository (its fetches use it), and this module's. */
  readonly memory: object;
  /** The repository's objects, read and written directly (object-store.ts); its promisor is `fetchMissing`. */
  readonly objects: GitObjectStore;
  /** Commits fetched at first; the history is deepened only when the trailer search needs it. */
  readonly fetchDepth: number;
  /** Levels of the head's tree, from the root, fetched with the head by id when it is `base` (tree-editor.ts historyTreeLevels). @default 0: none */
  readonly historyTreeLevels?: number;
  /** The job's base: when the head is it, the trailer search reads no ancestor. */
  readonly base?: string;
  readonly logger?: JobLogger;
  /** How this job fetches, once it had to (see the header). */
  mode?: 'partial' | 'whole';
  /** Set when the repository changed in ways the object store did not count: the cache measures it. */
  measure: boolean;
  /** upload-pack's capabilities, asked at most once per job, and only when a fetch by id failed. */
  uploadPack?: Promise<UploadPackInfo>;
  /** False once the remote refused several tree levels in one request. */
  treeLevels?: boolean;
  /** Set once the repository is marked a partial clone. */
  markedPartial?: boolean;
}

/** Remotes whose upload-pack sent objects by id before, per repository (RepoLease.memory). */
const filteringRemotes = new WeakSet<object>();

/** Repositories (RepoLease.memory) fetched whole, with why: their next job does not try by id again. */
const wholeRemotes = new WeakMap<object, string>();

/**
 * Remotes (by URL) that refused several tree levels in one request, for the life of the process: a
 * host that refuses `combine` (GitHub) is not asked again by every cold job of a container.
 */
const oneLevelRemotes = new Set<string>();

function treeLevelsAllowed(session: BranchSession): boolean {
  return session.treeLevels !== false && !oneLevelRemotes.has(session.remote.url);
}

function uploadPackInfo(session: BranchSession): Promise<UploadPackInfo> {
  return (session.uploadPack ??= probeUploadPack(session.remote));
}

const ref = (session: BranchSession) => `refs/heads/${session.branch}`;

/** Where the branch is, and a receive-pack discovery for the push (undefined: the push makes its own). */
export interface LocatedBranch {
  readonly head: string;
  readonly advertised: Promise<ReceivePackAdvertisement | undefined>;
}

const NO_DISCOVERY: Promise<undefined> = Promise.resolve(undefined);

/**
 * A cold job: where the branch is comes from receive-pack's ref advertisement, the discovery its
 * push needs anyway (so no `ls-refs` and no capability request), then the head's commit by id, or
 * the whole branch: syncBranch on an empty repository. A branch that moves after that is seen at
 * the push (whose compare-and-swap is receive-pack's own in any case).
 */
export function locateBranch(session: BranchSession): Promise<LocatedBranch> {
  return syncBranch(session, `fetch ${session.branch}`);
}

/**
 * A warm job: the cache is never trusted for where the branch is; the remote is asked (a
 * receive-pack discovery that the push reuses, so a warm job talks to the remote twice: look,
 * push), and a head the repository lacks is fetched.
 */
export async function syncBranch(
  session: BranchSession,
  action = `list refs of ${session.branch}`,
): Promise<LocatedBranch> {
  let advertised: ReceivePackAdvertisement;
  try {
    advertised = await discoverReceivePack(session.remote);
  } catch (error) {
    throw classifyRemoteError(error, action);
  }
  const head = advertised.refs.get(ref(session));
  if (head === undefined) throw branchNotFound(session.branch);
  // The local branch is left as it is: it names a commit the repository holds, all a later fetch
  // needs of it, and a push moves it to the job's commit.
  if (await session.objects.has(head)) return { head, advertised: Promise.resolve(advertised) };
  const fetched = await fetchHead(session, head);
  return { head: fetched, advertised: fetched === head ? Promise.resolve(advertised) : NO_DISCOVERY };
}

/** Where the branch is now (after a push that did not land), its head's history fetched as far as the mode does at first. */
export async function refreshBranch(session: BranchSession): Promise<string> {
  if ((await fetchMode(session)) === 'whole') return fetchBranch(session, session.fetchDepth);
  return (await syncBranch(session)).head;
}

/**
 * Fetches `head` and its ancestors to the first depth, or by id with the top levels of its tree
 * (`historyTreeLevels`) the head alone: git walks every tree below a commit for that filter, once
 * per commit (docs/decisions.md §40), and the trailer search reads no ancestor when the head is the
 * job's base; otherwise the history comes without trees, and the trees as preload asks. Returns the
 * head fetched (another one when the whole branch was, and it had moved).
 */
async function fetchHead(session: BranchSession, head: string): Promise<string> {
  const withTrees =
    head === session.base &&
    session.historyTreeLevels !== undefined &&
    session.historyTreeLevels > 0 &&
    treeLevelsAllowed(session);
  const request = withTrees
    ? { wants: [head], depth: 1, treeLevels: session.historyTreeLevels }
    : { wants: [head], depth: session.fetchDepth };
  if (await fetchById(session, request, 'history')) {
    // The branch as last seen on the remote, as a whole fetch leaves it.
    await git.writeRef({ fs, gitdir: session.gitdir, ref: ref(session), value: head, force: true });
    return head;
  }
  return fetchBranch(session, session.fetchDepth);
}

/**
 * `oid` and `depth - 1` generations of its ancestors, where the trailer search reached the end of
 * the history fetched so far: by id, or by deepening the whole branch's shallow history.
 */
export async function fetchAncestors(session: BranchSession, oid: string, depth: number): Promise<void> {
  if (await fetchById(session, { wants: [oid], depth }, 'history')) return;
  session.measure = true;
  try {
    await git.fetch({
      fs,
      gitdir: session.gitdir,
      ...remoteArgs(session.remote),
      ref: session.branch,
      singleBranch: true,
      depth,
      relative: true,
      tags: false,
      cache: session.memory,
    });
  } catch (error) {
    throw classifyRemoteError(error, `deepen ${session.branch}`);
  }
}

/**
 * The object store's promisor: trees and blobs by id, in one request, with `treeLevels` levels of
 * trees below the wanted ones. In whole mode nothing is missing that a fetch could bring.
 */
export async function fetchMissing(
  session: BranchSession,
  oids: readonly string[],
  options: { treeLevels?: number } = {},
): Promise<void> {
  await fetchById(
    session,
    { wants: oids, treeLevels: options.treeLevels },
    options.treeLevels ? 'trees' : 'trees and blobs',
  );
}

/** The mode known so far: a remote not known not to filter is asked by id (fetchById finds out). */
async function fetchMode(session: BranchSession): Promise<'partial' | 'whole'> {
  if (session.mode) return session.mode;
  const why = wholeRemotes.get(session.memory);
  if (why === undefined) return 'partial';
  await wholeMode(session, why);
  return 'whole';
}

/**
 * Fetches `request` by id unless the job is in whole mode; false when it is (or just became: the
 * caller then fetches the whole branch). The first fetch by id of a remote not known to filter is
 * also what finds out: a refused filter, or a failure the capability probe then explains by the
 * remote offering no filters, turns whole mode on; another failure is the job's.
 */
async function fetchById(session: BranchSession, request: FetchRequest, what: string): Promise<boolean> {
  if ((await fetchMode(session)) === 'whole') return false;
  const known = session.mode === 'partial' || filteringRemotes.has(session.memory);
  try {
    await fetchObjects(session, request, what);
    return true;
  } catch (error) {
    if (error instanceof TransientJobError && error.cause instanceof FilterRefusedError) {
      await wholeMode(session, `it refused the filter: ${error.cause.message}`);
      return false;
    }
    if (known) throw error;
    const info = await uploadPackInfo(session).catch((probeError: unknown) => {
      throw classifyRemoteError(probeError, `fetch ${session.branch}`);
    });
    if (info.filters) throw error;
    await wholeMode(session, 'its upload-pack offers no protocol v2 fetch with object filters');
    return false;
  }
}

async function wholeMode(session: BranchSession, why: string): Promise<void> {
  if (await session.objects.partial()) {
    throw new TransientJobError(
      `fetch ${session.branch}: the cached repository is partial and the remote no longer sends objects by id (${why}); the next attempt starts without it`,
    );
  }
  session.mode = 'whole';
  wholeRemotes.set(session.memory, why);
  session.logger?.warn('the remote cannot send objects by id: fetching the branch whole', {
    jobId: session.jobId,
    why,
  });
}

/**
 * Marks the repository a partial clone the way git does (`remote.origin.promisor`,
 * `extensions.partialClone`, which needs repository format 1), so the git CLI reads it as one:
 * objects that `.promisor` packs reference may be missing. Done once per repository.
 */
async function markPartial(session: BranchSession): Promise<void> {
  const { gitdir } = session;
  if (session.markedPartial) return;
  session.markedPartial = true;
  if ((await git.getConfig({ fs, gitdir, path: 'extensions.partialclone' })) === 'origin') return;
  await git.setConfig({ fs, gitdir, path: 'core.repositoryformatversion', value: '1' });
  await git.setConfig({ fs, gitdir, path: 'remote.origin.promisor', value: 'true' });
  await git.setConfig({ fs, gitdir, path: 'remote.origin.partialclonefilter', value: 'tree:0' });
  await git.setConfig({ fs, gitdir, path: 'extensions.partialclone', value: 'origin' });
  session.measure = true;
}

/**
 * Fetches `request` into the repository. What a pack lacks is asked for again: git leaves out a
 * wanted object that another wanted tree of the request holds (upload-pack.ts); a request that
 * brings none of what it asked for is refused. Tree levels below the wants are asked for only while
 * the remote takes them: once refused, the same request goes again without them.
 */
async function fetchObjects(session: BranchSession, request: FetchRequest, what: string): Promise<void> {
  const action = `fetch ${request.depth === undefined ? 'objects' : 'history'} of ${session.branch}`;
  const treeLevels = treeLevelsAllowed(session) ? (request.treeLevels ?? 0) : 0;
  try {
    for (let wants = request.wants; wants.length > 0;) {
      const started = performance.now();
      const pack = await fetchPack(session.remote, { ...request, wants, treeLevels });
      const absent = await session.objects.keepReceived(pack, wants);
      // What each request brings, for the job's debug log (docs/decisions.md §40).
      session.logger?.debug('fetched by id', {
        jobId: session.jobId,
        brings: what,
        wants: wants.length,
        depth: request.depth,
        filter: filterOf(treeLevels),
        bytes: pack.length,
        ms: Math.round(performance.now() - started),
      });
      if (absent.length === wants.length)
        throw new RemoteAnswerError(
          `the remote's pack lacks the ${wants.length} objects asked for, first ${wants[0] as string}`,
          'malformed',
        );
      wants = absent;
    }
    session.mode = 'partial';
    filteringRemotes.add(session.memory);
    await markPartial(session);
  } catch (error) {
    if (treeLevels > 0 && error instanceof FilterRefusedError) {
      session.treeLevels = false;
      oneLevelRemotes.add(session.remote.url);
      session.logger?.info('the remote sends one level of trees a request', {
        jobId: session.jobId,
        why: error.message,
      });
      // The history's request asked for the head alone: without trees, to the first depth again.
      return fetchObjects(
        session,
        request.depth === undefined
          ? { ...request, treeLevels: 0 }
          : { wants: request.wants, depth: session.fetchDepth },
        what,
      );
    }
    throw classifyRemoteError(error, action);
  }
}

/** Shallow fetch of the whole branch (isomorphic-git); returns its head. A missing branch is permanent: the job names a branch that is not there. */
async function fetchBranch(session: BranchSession, depth: number): Promise<string> {
  session.measure = true;
  try {
    const { fetchHead } = await git.fetch({
      fs,
      gitdir: session.gitdir,
      ...remoteArgs(session.remote),
      ref: session.branch,
      singleBranch: true,
      depth,
      tags: false,
      cache: session.memory,
    });
    if (fetchHead) {
      // The branch as last seen on the remote: the next fetch sends it as what we have.
      await git.writeRef({ fs, gitdir: session.gitdir, ref: ref(session), value: fetchHead, force: true });
      return fetchHead;
    }
  } catch (error) {
    if (!(error instanceof Errors.NotFoundError)) throw classifyRemoteError(error, `fetch ${session.branch}`);
  }
  throw await missingBranch(session);
}

/**
 * Why the branch was not found. Asked for protocol v2, a git server (git 2.18 or later, every
 * hosting service) advertises its capabilities, also for an empty repository; a remote that
 * advertises none did not speak git even if its answer began like it (a service line, then
 * anything), and the job's branch is not what is wrong. (An empty repository on a server older
 * than protocol v2 advertises nothing either, and is refused the same way: a permanent verdict
 * still, with the message saying what was seen.)
 */
async function missingBranch(session: BranchSession): Promise<PermanentJobError> {
  const action = `fetch ${session.branch}`;
  const info = await uploadPackInfo(session).catch((error: unknown) => {
    throw classifyRemoteError(error, action);
  });
  return info.speaksGit ? branchNotFound(session.branch) : notGitError(action, 'its answer names no git capabilities');
}

function branchNotFound(branch: string): PermanentJobError {
  return new PermanentJobError(
    'BRANCH_NOT_FOUND',
    `branch ${branch} does not exist on the remote: create it, then run the job again: agent-jobs dlq redrive <jobId>`,
  );
}
