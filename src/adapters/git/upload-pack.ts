/**
 * Fetches objects by id with git's protocol v2 (the `fetch` command of upload-pack,
 * gitprotocol-v2) and the object filter `tree:0`, so the remote sends what it is asked for and
 * nothing that it references: a tree without its subtrees or blobs, a blob, or commits down to a
 * depth without their trees. A cold job asks for what its patch touches, not for the repository.
 *
 * Written here because isomorphic-git fetches over protocol v1 only, with neither filters nor wants
 * by object id (its "Implement Partial Clone" issue, #1123, is open): its fetch of a branch brings
 * every tree and blob of the head. isomorphic-git still reads the capability advertisement
 * (getRemoteInfo2), asked only when a fetch by id failed (branch-fetch.ts); what is written here is
 * the `fetch` request and the reading of its answer.
 *
 * Why `tree:0` for a request that names all it wants: it is the filter hosts allow most widely (a
 * "treeless clone"), and git sends an object named by a `want` whatever the filter says, while `blob:none` would send
 * every subtree of a wanted tree. Commits are asked for with a depth (`deepen`), else their whole
 * history would come; trees and blobs without one. One thing git does shaped the callers: it
 * leaves out of the pack a wanted object that an earlier wanted tree holds as an entry (git 2.39;
 * test/integration/git-partial-fetch.test.ts shows it), so blobs are asked for before trees, and
 * what a pack lacks is asked for again (branch-fetch.ts).
 *
 * Several levels of trees in one request (`treeLevels`): `combine:blob:none+tree:<n>`, the trees
 * down to `n` levels below each wanted object (a commit's root tree is the first) and no blob.
 * `tree:<n>` alone will not do: git counts the entries of a wanted tree as depth 0, so it sends
 * the blobs of every level but the last. Hosts may allow only some filters (GitHub's upload-pack is
 * reported to answer `filter 'combine' not supported`), or cap the tree depth: a refusal is a
 * FilterRefusedError, and the caller asks again a level at a time (docs/decisions.md §40).
 */
import * as git from 'isomorphic-git';
import { DELIM, FLUSH, RemoteAnswerError, pktLine, pktText, readPktLines } from './pkt-line';
import { postService, remoteArgs, type RemoteOptions } from './remote';

const OID = /^[0-9a-f]{40}$/;

/** What upload-pack's capability advertisement says about fetching by id with filters. */
export interface UploadPackInfo {
  /** Protocol v2, a `fetch` that takes `filter` and `deepen` (`shallow`), and SHA-1 object names. */
  readonly filters: boolean;
  /** Whether the answer named any capability at all: a server that names none does not speak git. */
  readonly speaksGit: boolean;
}

/** Asks the remote's upload-pack for its protocol v2 capabilities (one GET; an older server answers in v0/v1). */
export async function probeUploadPack(remote: RemoteOptions): Promise<UploadPackInfo> {
  const info = await git.getRemoteInfo2({ ...remoteArgs(remote), protocolVersion: 2 });
  const fetch = info.protocolVersion === 2 ? info.capabilities.fetch : undefined;
  const features = typeof fetch === 'string' ? fetch.split(' ') : [];
  const format = info.capabilities['object-format'];
  return {
    filters: features.includes('filter') && features.includes('shallow') && (format === undefined || format === 'sha1'),
    speaksGit: Object.keys(info.capabilities).length > 0,
  };
}

/** The remote refused the filter asked for (a host may allow only some filters, or trees only so deep). */
export class FilterRefusedError extends RemoteAnswerError {
  override readonly name = 'FilterRefusedError';
  constructor(message: string) {
    super(message, 'reported');
  }
}

const V2 = { 'Git-Protocol': 'version=2' };

export interface FetchRequest {
  /** Object ids; commits only when `depth` is given, trees and blobs only without it. */
  readonly wants: readonly string[];
  /** For commits: how many generations to send, the wanted ones included. */
  readonly depth?: number;
  /** Levels of trees to send below each wanted object, without blobs (a commit's root tree is the first). @default 0 */
  readonly treeLevels?: number;
}

/** The filter line of a request: nothing the wants do not name, or trees `treeLevels` deep below them and no blob. */
export function filterOf(treeLevels = 0): string {
  return treeLevels > 0 ? `combine:blob:none+tree:${treeLevels}` : 'tree:0';
}

/** One `fetch` request: the pack the remote answers with (its objects not yet checked against the wants). */
export async function fetchPack(remote: RemoteOptions, { wants, depth, treeLevels }: FetchRequest): Promise<Buffer> {
  for (const oid of wants) if (!OID.test(oid)) throw new Error(`not an object id: ${JSON.stringify(oid)}`);
  const request = Buffer.concat([
    pktLine('command=fetch\n'),
    DELIM,
    // The answer's pack may hold offset deltas (object-store.ts reads them), never a thin pack.
    pktLine('ofs-delta\n'),
    pktLine('no-progress\n'),
    ...(depth === undefined ? [] : [pktLine(`deepen ${depth}\n`)]),
    pktLine(`filter ${filterOf(treeLevels)}\n`),
    ...wants.map((oid) => pktLine(`want ${oid}\n`)),
    pktLine('done\n'),
    FLUSH,
  ]);
  return packOf(await postService(remote, 'git-upload-pack', request, V2));
}

/**
 * The pack of a `fetch` answer: sections (`shallow-info`, then `packfile`, whose lines carry the
 * pack on side band 1, progress on 2, an error on 3), each opened by its name and closed by a
 * delimiter, the last by a flush. An `ERR` line may come instead of anything.
 */
function packOf(answer: Buffer): Buffer {
  const pack: Buffer[] = [];
  let section: string | undefined;
  for (const line of readPktLines(answer)) {
    if (line.kind === 'delim') {
      section = undefined;
      continue;
    }
    if (line.kind !== 'data') {
      if (section !== 'packfile')
        throw new RemoteAnswerError('the fetch answer ends without a packfile section', 'malformed');
      return Buffer.concat(pack);
    }
    const { payload } = line;
    if (section === 'packfile') {
      const band = payload[0];
      if (band === 1) pack.push(payload.subarray(1));
      else if (band === 3) throw reported(pktText(payload.subarray(1)));
      else if (band !== 2)
        throw new RemoteAnswerError(`the packfile section has a line on side band ${String(band)}`, 'malformed');
      continue;
    }
    const text = pktText(payload);
    if (text.startsWith('ERR ')) throw reported(text.slice('ERR '.length));
    // A section's name, or a line of one this client reads nothing from (shallow-info).
    section ??= text;
  }
  throw new RemoteAnswerError('the fetch answer stops before its end', 'cut');
}

function reported(message: string): RemoteAnswerError {
  // git's words when uploadpackfilter.* forbids the filter: "filter 'tree' not supported", or
  // "tree filter allows max depth 0, but got 3".
  return /^(filter\b|tree filter allows max depth)/.test(message)
    ? new FilterRefusedError(message)
    : new RemoteAnswerError(message, 'reported');
}
