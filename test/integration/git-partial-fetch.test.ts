/**
 * A cold job on a generated repository of 3,000 files costs what its patch touches: against the
 * loopback git server with filters (protocol v2, objects by id), the bytes it receives are a small
 * fraction of the repository, which the same job without filters (the fallback: the branch
 * fetched whole, said in the job's log) receives in full. Both push the same commit, the one
 * `git apply --index` makes. Also: the trailer search over history fetched without trees, a warm
 * job on a partial repository, a remote that refuses the filter, and the git behaviours the
 * protocol client relies on.
 */
import { join } from 'node:path';
import type { GitHttpRequest, HttpClient } from 'isomorphic-git';
import nodeHttp from 'isomorphic-git/http/node';
import { RepoCache, applyPatchCommit, type ApplyPatchCommitInput } from '../../src/adapters/git';
import { indexPack } from '../../src/adapters/git/object-store';
import { pktLine, pktText, readPktLines } from '../../src/adapters/git/pkt-line';
import { remoteOptions } from '../../src/adapters/git/remote';
import { FilterRefusedError, fetchPack, probeUploadPack } from '../../src/adapters/git/upload-pack';
import { TransientJobError } from '../../src/core/errors';
import type { JobLogger } from '../../src/core/ports';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import {
  fastImportCommit,
  generateRepository,
  generatedContent,
  generatedDiff,
  generatedPath,
} from '../support/generated-repo';
import { git, gitApplyTree, removeDir, tempDir } from '../support/git-fixtures';

const FILES = 3_000;
const LINES = 20;

let root: string;
let source: string;
let baseSha: string;
/** Bytes of the source repository's pack: what fetching the branch whole costs, near enough. */
let packBytes: number;
let filtering: GitServer;
let whole: GitServer;
let repoCount = 0;

/** An agent's patch over the generated tree: edits in three directories, a deletion, a rename with an edit, new files in an old and a new directory. */
const EDITS = {
  write: {
    [generatedPath(40)]: generatedContent(40, LINES, "'edited'"),
    [generatedPath(1_000)]: generatedContent(1_000, LINES, "'edited'"),
    [generatedPath(2_990)]: generatedContent(2_990, LINES, "'edited'"),
    [generatedPath(2_001).replace(/file\d+\.ts$/, 'renamed.ts')]: generatedContent(2_001, LINES, "'renamed'"),
    [generatedPath(41).replace(/file\d+\.ts$/, 'added.ts')]: 'export const added = true;\n',
    'tools/new-tool/src/index.ts': 'export const tool = true;\n',
  },
  remove: [generatedPath(1_500), generatedPath(2_001)],
};
let diff: string;

beforeAll(async () => {
  root = await tempDir('partial');
  source = join(root, 'source.git');
  baseSha = await generateRepository(source, FILES, LINES);
  diff = await generatedDiff(source, baseSha, EDITS);
  packBytes = Number(/size-pack: (\d+)/.exec(await git(source, 'count-objects', '-v'))?.[1]) * 1024;
  filtering = await startGitServer({ root: join(root, 'filtering') });
  whole = await startGitServer({ root: join(root, 'whole'), filters: false });
});

afterAll(async () => {
  await Promise.all([filtering.close(), whole.close()]);
  await removeDir(root);
});

async function freshRemote(server: GitServer): Promise<{ url: string; gitDir: string }> {
  const name = `remote-${++repoCount}`;
  return { url: server.repoUrl(name), gitDir: await server.importRepository(source, name) };
}

function job(url: string, overrides: Partial<ApplyPatchCommitInput> = {}): ApplyPatchCommitInput {
  return {
    repoUrl: url,
    branch: 'main',
    diff,
    baseSha,
    jobId: 'job-partial',
    message: 'Agent edit',
    createdAt: '2026-03-01T12:00:00.000Z',
    workDir: root,
    ...overrides,
  };
}

/** The real client, counting the bytes of every answer and keeping each upload-pack request's lines. */
function meteredHttp(): HttpClient & {
  bytes: number;
  readonly uploadPackRequests: string[][];
  readonly requests: string[];
} {
  const metered = {
    bytes: 0,
    uploadPackRequests: [] as string[][],
    requests: [] as string[],
    async request(req: GitHttpRequest) {
      const url = new URL(req.url);
      metered.requests.push(`${req.method ?? 'GET'} ${url.pathname.split('/').pop() ?? ''}${url.search}`);
      if (req.method === 'POST' && url.pathname.endsWith('/git-upload-pack') && req.body) {
        const chunks: Uint8Array[] = [];
        for await (const chunk of req.body) chunks.push(chunk);
        const body = Buffer.concat(chunks);
        metered.uploadPackRequests.push(
          [...readPktLines(body)].flatMap((line) => (line.kind === 'data' ? [pktText(line.payload)] : [])),
        );
        req = {
          ...req,
          body: (async function* () {
            yield body;
          })(),
        };
      }
      const res = await nodeHttp.request(req);
      const answer = res.body;
      return {
        ...res,
        body: (async function* () {
          for await (const chunk of answer ?? []) {
            metered.bytes += chunk.length;
            yield chunk;
          }
        })(),
      };
    },
  };
  return metered;
}

/** A JobLogger that keeps what was logged. */
function keptLog(): JobLogger & {
  readonly lines: { level: string; message: string; extra: Record<string, unknown> }[];
} {
  const lines: { level: string; message: string; extra: Record<string, unknown> }[] = [];
  const at =
    (level: string) =>
    (message: string, ...extra: Record<string, unknown>[]) =>
      void lines.push({ level, message, extra: Object.assign({}, ...extra) as Record<string, unknown> });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

const fetchesOf = (http: ReturnType<typeof meteredHttp>) =>
  http.uploadPackRequests.filter((lines) => lines.includes('command=fetch'));

test('with filters, a cold job fetches what its patch reads, by id; without, the whole branch, said in its log; both push the same commit', async () => {
  const partial = await freshRemote(filtering);
  const partialHttp = meteredHttp();
  const partialLog = keptLog();
  const viaFilters = await applyPatchCommit(job(partial.url), { http: partialHttp, logger: partialLog });

  const fallback = await freshRemote(whole);
  const fallbackHttp = meteredHttp();
  const fallbackLog = keptLog();
  const viaWhole = await applyPatchCommit(job(fallback.url), { http: fallbackHttp, logger: fallbackLog });

  // The same commit, the one `git apply --index` makes, and a remote that git checks clean.
  expect(viaFilters).toEqual({ commitSha: viaWhole.commitSha, parentSha: baseSha, alreadyApplied: false });
  expect(await git(partial.gitDir, 'rev-parse', 'main^{tree}')).toBe(await gitApplyTree(partial.gitDir, baseSha, diff));
  await git(partial.gitDir, 'fsck', '--strict', '--no-progress');

  // What each received: the whole branch is the repository (its pack); the partial job a sliver of it.
  expect(fallbackHttp.bytes).toBeGreaterThan(packBytes / 2);
  expect(partialHttp.bytes).toBeLessThan(packBytes / 20);
  expect(partialHttp.bytes * 10).toBeLessThan(fallbackHttp.bytes);

  // Every fetch names its objects and a filter that sends no blob it does not name: tree:0, or
  // trees some levels below what it names; commits come with a depth, trees and blobs without.
  const fetches = fetchesOf(partialHttp);
  for (const lines of fetches)
    expect(lines).toContainEqual(expect.stringMatching(/^filter (tree:0|combine:blob:none\+tree:\d+)$/));
  // The head is the job's base: the trailer search reads no ancestor, so the head comes alone, with the top of its tree.
  expect(fetches[0]).toEqual(
    expect.arrayContaining([`want ${baseSha}`, 'deepen 1', 'filter combine:blob:none+tree:2']),
  );
  for (const lines of fetches.slice(1)) expect(lines.some((line) => line.startsWith('deepen'))).toBe(false);
  // The history with the top levels of the tree, the levels below on the touched paths, the blobs:
  // not one request per directory level (root, area, package, src, module), nor per object.
  expect(fetches.length).toBe(3);

  expect(fallbackLog.lines).toContainEqual({
    level: 'warn',
    message: 'the remote cannot send objects by id: fetching the branch whole',
    extra: expect.objectContaining({
      jobId: 'job-partial',
      why: expect.stringMatching(/no protocol v2 fetch with object filters/),
    }),
  });
  expect(partialLog.lines.filter((line) => line.level === 'warn')).toEqual([]);
  expect(partialLog.lines).toContainEqual(
    expect.objectContaining({ message: 'patch committed', extra: expect.objectContaining({ fetched: 'partial' }) }),
  );
});

test('a redelivery finds its commit under later ones by history fetched without trees, and pushes nothing', async () => {
  const { url, gitDir } = await freshRemote(filtering);
  const applied = await applyPatchCommit(job(url));
  // Twelve more commits by another writer, then a redelivery without a base: the first fetch (depth 3) does not reach it.
  let head = applied.commitSha;
  for (let i = 0; i < 12; i++)
    head = await fastImportCommit(gitDir, 'main', { parent: head, edits: { write: { [`later/${i}.txt`]: `${i}\n` } } });
  const http = meteredHttp();
  const again = await applyPatchCommit(job(url, { baseSha: undefined }), { http, fetchDepth: 3 });
  expect(again).toEqual({ ...applied, alreadyApplied: true });
  expect(await git(gitDir, 'rev-parse', 'main')).toBe(head);
  expect(http.requests).not.toContain('POST git-receive-pack');
  // Only commits were fetched: history, deepened as the search went, and not one tree.
  const fetches = fetchesOf(http);
  expect(fetches.length).toBeGreaterThan(1);
  for (const lines of fetches)
    expect(lines).toEqual(expect.arrayContaining(['filter tree:0', expect.stringMatching(/^deepen \d+$/)]));
  expect(http.bytes).toBeLessThan(packBytes / 100);
});

test('a warm job on a partial repository fetches only the trees and blobs it lacks; the cache holds a partial clone git reads', async () => {
  const { url, gitDir } = await freshRemote(filtering);
  const cache = new RepoCache({ dir: join(root, 'cache'), maxBytes: 64 * 2 ** 20 });
  const first = await applyPatchCommit(job(url), { cache });
  const second = generatedPath(2_500);
  const laterDiff = await generatedDiff(
    gitDir,
    first.commitSha,
    { write: { [second]: generatedContent(2_500, LINES, "'warm'") } },
    'warm-edit',
  );
  const http = meteredHttp();
  const result = await applyPatchCommit(job(url, { diff: laterDiff, jobId: 'job-warm', baseSha: first.commitSha }), {
    cache,
    http,
  });
  expect(await git(gitDir, 'rev-parse', `${result.commitSha}^{tree}`)).toBe(
    await gitApplyTree(gitDir, first.commitSha, laterDiff),
  );
  // The head was its own push: no capability probe, no history; the trees of a directory no job read before, and the blob.
  const fetches = fetchesOf(http);
  expect(http.requests.filter((r) => r.startsWith('GET') && r.includes('upload-pack'))).toEqual([]);
  expect(fetches.every((lines) => !lines.some((line) => line.startsWith('deepen')))).toBe(true);
  expect(fetches.flat().filter((line) => line.startsWith('want ')).length).toBeLessThanOrEqual(
    second.split('/').length,
  );
  // The cached repository is a partial clone as git knows one: fsck passes, and most objects are missing.
  const [cached] = (await cache.idle()).keys();
  const repo = join(root, 'cache', cached as string);
  await git(repo, 'fsck', '--strict', '--no-progress', '--no-dangling');
  expect(await git(repo, 'config', 'extensions.partialclone')).toBe('origin');
  expect(Number(/in-pack: (\d+)/.exec(await git(repo, 'count-objects', '-v'))?.[1])).toBeLessThan(FILES / 20);
});

test('a remote that advertises filters but refuses tree:0 gets the whole branch; a partial cache of it is dropped and the job retried cold', async () => {
  const { url, gitDir } = await freshRemote(filtering);
  const cache = new RepoCache({ dir: join(root, 'cache-refused'), maxBytes: 64 * 2 ** 20 });
  await applyPatchCommit(job(url, { jobId: 'job-before' }), { cache });
  // The host now refuses the tree filter (git's own setting, in the repository's config).
  await git(gitDir, 'config', 'uploadpackfilter.tree.allow', 'false');
  const head = await git(gitDir, 'rev-parse', 'main');
  const other = await fastImportCommit(gitDir, 'main', {
    parent: head,
    edits: { write: { 'other.txt': 'another writer\n' } },
  });
  const log = keptLog();
  const next = job(url, {
    diff: await generatedDiff(gitDir, other, { write: { 'notes/next.txt': 'next\n' } }, 'next-edit'),
    jobId: 'job-next',
    baseSha: other,
  });
  // The cached repository is partial: fetching the whole branch into it would take its missing objects for present.
  await expect(applyPatchCommit(next, { cache, logger: log })).rejects.toThrow(TransientJobError);
  expect(await cache.idle()).toEqual(new Map());
  const retried = await applyPatchCommit(next, { cache, logger: log });
  expect(retried.parentSha).toBe(other);
  expect(log.lines).toContainEqual(
    expect.objectContaining({
      level: 'warn',
      extra: expect.objectContaining({ why: "it refused the filter: filter 'tree' not supported" }),
    }),
  );
  await git(gitDir, 'fsck', '--strict', '--no-progress');
});

test('a remote that speaks only protocol v0 gets the whole branch: its fetch by id fails, and the capability probe, asked only then, says why', async () => {
  const { url, gitDir } = await freshRemote(filtering);
  // An older server: the Git-Protocol header never reaches git, so upload-pack speaks v0.
  const v0Only: HttpClient = {
    request: (req) =>
      nodeHttp.request({
        ...req,
        headers: Object.fromEntries(
          Object.entries(req.headers ?? {}).filter(([name]) => name.toLowerCase() !== 'git-protocol'),
        ),
      }),
  };
  const log = keptLog();
  const result = await applyPatchCommit(job(url), { http: v0Only, logger: log });
  expect(await git(gitDir, 'rev-parse', `${result.commitSha}^{tree}`)).toBe(await gitApplyTree(gitDir, baseSha, diff));
  expect(log.lines).toContainEqual(
    expect.objectContaining({
      level: 'warn',
      extra: expect.objectContaining({ why: 'its upload-pack offers no protocol v2 fetch with object filters' }),
    }),
  );
});

test.each([
  [
    'an answer cut short mid-pack',
    (answer: Buffer) => answer.subarray(0, answer.length - 30),
    /the answer was cut short/,
  ],
  [
    'an error the remote reports (ERR)',
    () => pktLine('ERR upload-pack: not our ref'),
    /the remote reported an error: upload-pack: not our ref/,
  ],
])('%s is transient, and the remote is unchanged', async (_what, answerWith, says) => {
  const { url, gitDir } = await freshRemote(filtering);
  // Fault injection: every fetch is answered with the altered answer.
  const altering: HttpClient = {
    async request(req) {
      if (req.method !== 'POST' || !req.url.endsWith('/git-upload-pack') || !req.body) return nodeHttp.request(req);
      const sent: Uint8Array[] = [];
      for await (const chunk of req.body) sent.push(chunk);
      const res = await nodeHttp.request({
        ...req,
        body: (async function* () {
          yield Buffer.concat(sent);
        })(),
      });
      const chunks: Uint8Array[] = [];
      for await (const chunk of res.body ?? []) chunks.push(chunk);
      const answer = Buffer.concat(chunks);
      const altered = Buffer.concat(sent).includes('command=fetch') ? answerWith(answer) : answer;
      return {
        ...res,
        body: (async function* () {
          yield altered;
        })(),
      };
    },
  };
  const error = await applyPatchCommit(job(url), { http: altering }).catch((caught: unknown) => caught);
  expect(error).toBeInstanceOf(TransientJobError);
  expect((error as Error).message).toMatch(says);
  expect(await git(gitDir, 'rev-parse', 'main')).toBe(baseSha);
});

test('a remote that answers with other objects than those asked for is refused as not speaking git, and nothing is pushed', async () => {
  const { url, gitDir } = await freshRemote(filtering);
  const decoy = await git(gitDir, 'rev-parse', 'main:tools');
  // Fault injection: every request for trees or blobs is answered for another tree (a valid pack, of the wrong object).
  const substituting: HttpClient = {
    async request(req) {
      if (req.method !== 'POST' || !req.url.endsWith('/git-upload-pack') || !req.body) return nodeHttp.request(req);
      const chunks: Uint8Array[] = [];
      for await (const chunk of req.body) chunks.push(chunk);
      let body = Buffer.concat(chunks).toString('latin1');
      if (body.includes('command=fetch') && !body.includes('deepen'))
        body = body.replace(/want [0-9a-f]{40}/g, `want ${decoy}`);
      return nodeHttp.request({
        ...req,
        body: (async function* () {
          yield Buffer.from(body, 'latin1');
        })(),
      });
    },
  };
  await expect(applyPatchCommit(job(url), { http: substituting })).rejects.toMatchObject({
    reason: 'REJECTED_BY_TARGET',
    message: expect.stringMatching(/the remote's pack lacks the \d+ objects asked for/),
  });
  expect(await git(gitDir, 'rev-parse', 'main')).toBe(baseSha);
});

describe('what the protocol client relies on in git (src/adapters/git/upload-pack.ts)', () => {
  test('a want under tree:0 brings that object alone, but not an object an earlier wanted tree holds; commits come to the depth asked', async () => {
    const { url, gitDir } = await freshRemote(filtering);
    const remote = remoteOptions(url);
    expect(await probeUploadPack(remote)).toEqual({ filters: true, speaksGit: true });
    const tree = await git(gitDir, 'rev-parse', 'main:services/pkg0/src');
    const blob = await git(gitDir, 'rev-parse', 'main:services/pkg0/src/file0.ts');
    expect(indexPack(await fetchPack(remote, { wants: [blob, tree] })).oids).toEqual(new Set([blob, tree]));
    // git 2.39: the tree's entries count as seen once the tree is, so a blob asked for after it is left out.
    expect(indexPack(await fetchPack(remote, { wants: [tree, blob] })).oids).toEqual(new Set([tree]));
    expect(indexPack(await fetchPack(remote, { wants: [baseSha], depth: 1 })).oids).toEqual(new Set([baseSha]));
    // Tree levels below a wanted tree come without a blob: the src directory and its modules one level down.
    const below = await git(
      gitDir,
      'ls-tree',
      '-r',
      '-t',
      '--format=%(objecttype) %(objectname) %(path)',
      'main:services/pkg0/src',
    );
    const twoDown = below
      .split('\n')
      .filter((line) => line.startsWith('tree ') && line.split(' ')[2]?.split('/').length === 1);
    expect(twoDown.length).toBeGreaterThan(0);
    const deep = indexPack(await fetchPack(remote, { wants: [tree], treeLevels: 1 })).oids;
    expect(deep).toEqual(new Set([tree, ...twoDown.map((line) => line.split(' ')[1])]));
    // A host that caps the depth refuses the request as a filter refused (then asked a level at a time).
    await git(gitDir, 'config', 'uploadpackfilter.tree.maxDepth', '0');
    await expect(fetchPack(remote, { wants: [tree], treeLevels: 2 })).rejects.toThrow(FilterRefusedError);
    expect(await probeUploadPack(remoteOptions((await freshRemote(whole)).url))).toEqual({
      filters: false,
      speaksGit: true,
    });
  });

  test('a directory that is the same tree as a subdirectory of a sibling is still fetched (asked for again when a pack lacks it), level by level where the host refuses several', async () => {
    const { url, gitDir } = await freshRemote(filtering);
    // As GitHub answers: "filter 'combine' not supported"; the job then asks a level at a time.
    await git(gitDir, 'config', 'uploadpackfilter.combine.allow', 'false');
    // dup/a/inner/ and dup/b/ hold the same files: one tree object, an entry of dup/a and a sibling of it.
    const same = { 'one.ts': 'export const one = 1;\n', 'two.ts': 'export const two = 2;\n' };
    const files = Object.fromEntries(
      Object.entries(same).flatMap(([name, text]) => [
        [`dup/a/inner/${name}`, text],
        [`dup/b/${name}`, text],
      ]),
    );
    const base = await fastImportCommit(gitDir, 'main', {
      parent: baseSha,
      edits: { write: { ...files, 'dup/a/own.ts': 'export const own = 0;\n' } },
    });
    expect(await git(gitDir, 'rev-parse', 'main:dup/a/inner')).toBe(await git(gitDir, 'rev-parse', 'main:dup/b'));
    const edit = await generatedDiff(
      gitDir,
      base,
      { write: { 'dup/a/own.ts': 'export const own = 1;\n', 'dup/b/two.ts': 'export const two = 22;\n' } },
      'dup-edit',
    );
    const http = meteredHttp();
    const log = keptLog();
    const result = await applyPatchCommit(job(url, { diff: edit, baseSha: base, jobId: 'job-dup' }), {
      http,
      logger: log,
    });
    expect(await git(gitDir, 'rev-parse', `${result.commitSha}^{tree}`)).toBe(await gitApplyTree(gitDir, base, edit));
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        level: 'info',
        message: 'the remote sends one level of trees a request',
        extra: expect.objectContaining({ why: "filter 'combine' not supported" }),
      }),
    );
    // Refused once (the history's request, asked again without tree levels), then one level a request.
    expect(fetchesOf(http).filter((lines) => lines.some((line) => line.startsWith('filter combine:')))).toHaveLength(1);
    const dupB = await git(gitDir, 'rev-parse', `${base}:dup/b`);
    // Asked for with its sibling dup/a, left out (dup/a holds it), and asked for again alone.
    expect(
      fetchesOf(http)
        .filter((lines) => lines.includes(`want ${dupB}`))
        .map((lines) => lines.filter((line) => line.startsWith('want ')).length),
    ).toEqual([2, 1]);
  });
});

describe('a cold job by id on a repository as deep as one of 300,000 files', () => {
  // Every 97th of 300,000 generated files: paths 8 directories under the root, as in the full
  // repository (test/support/generated-repo.ts), in 3,093 files. What a cold job asks for depends
  // on how deep its paths go, not on how many files there are; the full repository takes about
  // 90 s to generate here, this one a second.
  const STRIDE = 97;
  const at = (m: number) => STRIDE * m;
  const edited = [2_100, 2_500, 2_800, 3_000].map(at);
  const [deleted, renamed, shallow, besideAdded] = [at(2_900), at(2_200), at(10), at(2_100)];
  const deepSource = () => join(root, 'deep-source.git');
  let deepBase: string;
  let deepDiff: string;
  /** Paths whose content the patch reads: edited, deleted and renamed-from files. */
  let readPaths: string[];
  let writtenPaths: string[];

  beforeAll(async () => {
    deepBase = await generateRepository(deepSource(), 300_000, LINES, STRIDE);
    const write: Record<string, string> = {};
    for (const i of [...edited, shallow]) write[generatedPath(i)] = generatedContent(i, LINES, "'edited'");
    write[generatedPath(renamed).replace(/file\d+\.ts$/, 'renamed.ts')] = generatedContent(renamed, LINES, "'renamed'");
    write[generatedPath(besideAdded).replace(/file\d+\.ts$/, 'added.ts')] = 'export const added = true;\n';
    deepDiff = await generatedDiff(deepSource(), deepBase, {
      write,
      remove: [generatedPath(deleted), generatedPath(renamed)],
    });
    readPaths = [...edited, shallow, deleted, renamed].map(generatedPath);
    writtenPaths = Object.keys(write);
  });

  test('needs at most 4 requests before its push, and fetches no blob the patch does not read', async () => {
    // 8 directories under the root: 9 trees on the path, the root's included.
    expect(Math.max(...readPaths.map((path) => path.split('/').length - 1))).toBe(8);
    const name = `deep-${++repoCount}`;
    const gitDir = await filtering.importRepository(deepSource(), name);
    const cache = new RepoCache({ dir: join(root, 'cache-deep'), maxBytes: 64 * 2 ** 20 });
    const http = meteredHttp();
    const result = await applyPatchCommit(
      job(filtering.repoUrl(name), { diff: deepDiff, baseSha: deepBase, jobId: 'job-deep' }),
      { cache, http },
    );
    expect(await git(gitDir, 'rev-parse', `${result.commitSha}^{tree}`)).toBe(
      await gitApplyTree(gitDir, deepBase, deepDiff),
    );

    const push = http.requests.indexOf('POST git-receive-pack');
    expect(push).toBe(http.requests.length - 1);
    expect(http.requests.slice(0, push).length).toBeLessThanOrEqual(4);

    // The job's repository holds no blob but those the patch read and those it wrote.
    const [cached] = (await cache.idle()).keys();
    const objects = await git(
      join(root, 'cache-deep', cached as string),
      'cat-file',
      '--batch-all-objects',
      '--batch-check=%(objectname) %(objecttype)',
    );
    const blobs = objects
      .split('\n')
      .filter((line) => line.endsWith(' blob'))
      .map((line) => line.split(' ')[0]);
    const expected = await Promise.all(
      [
        ...readPaths.map((path) => `${deepBase}:${path}`),
        ...writtenPaths.map((path) => `${result.commitSha}:${path}`),
      ].map((spec) => git(gitDir, 'rev-parse', spec)),
    );
    expect(new Set(blobs)).toEqual(new Set(expected));
  });
});
