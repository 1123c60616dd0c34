/**
 * The warm repository cache against the loopback git server: a job that starts from the cache
 * commits exactly what a job that starts from nothing commits (read back with the git CLI), asks
 * the remote for the head every time so a stale or tampered cache never yields a wrong tree,
 * fetches only when it lacks the head, keeps jobs apart, and stays within its bytes. Every test
 * runs twice: against a server that sends objects by id (the repositories are partial) and one
 * that does not (they hold the whole branch head).
 */
import { mkdir, readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { GitHttpRequest, HttpClient } from 'isomorphic-git';
import nodeHttp from 'isomorphic-git/http/node';
import { RepoCache, applyPatchCommit, repoCacheKey, type ApplyPatchCommitInput } from '../../src/adapters/git';
import { TransientJobError } from '../../src/core/errors';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import { createRepo, diffOfEdits, git, gitApplyTree, removeDir, tempDir, writeFiles } from '../support/git-fixtures';

/**
 * What differs between the two servers: the fetches of a cold job whose patch adds a file under
 * `levels` existing directories, the root included (whole: a fetch by id the remote cannot
 * answer, then one fetch of the branch; partial: the head's history, then one tree per level: these
 * jobs name no base, so the history comes without trees), and whether a fetch writes what the job
 * counts itself.
 */
const MODES = [
  { mode: 'partial', filters: true, coldFetches: (levels: number) => 1 + levels, fetchCounted: true },
  { mode: 'whole', filters: false, coldFetches: (_levels: number) => 2, fetchCounted: false },
];

describe.each(MODES)('the repository cache, $mode repositories', ({ filters, coldFetches, fetchCounted }) => {
  let root: string;
  let server: GitServer;
  let sourceDir: string;
  let baseSha: string;
  let repoCount = 0;

  beforeAll(async () => {
    root = await tempDir('cache-root');
    sourceDir = join(root, 'source');
    await mkdir(sourceDir);
    const files: Record<string, string> = { 'README.md': '# cached\n' };
    for (let i = 0; i < 60; i++) files[`pkg${i % 6}/file${i}.txt`] = `file ${i}\n`;
    baseSha = await createRepo(sourceDir, files);
    server = await startGitServer({ root: join(root, 'repos'), filters });
  });

  afterAll(async () => {
    await server.close();
    await removeDir(root);
  });

  async function freshRemote(): Promise<{ url: string; gitDir: string }> {
    const name = `cached-${++repoCount}`;
    return { url: server.repoUrl(name), gitDir: await server.importRepository(sourceDir, name) };
  }

  /** A patch that adds `path`: it applies on any head that lacks the file. */
  function addFile(path: string, text: string): string {
    return [
      `diff --git a/${path} b/${path}`,
      'new file mode 100644',
      '--- /dev/null',
      `+++ b/${path}`,
      '@@ -0,0 +1 @@',
      `+${text}`,
      '',
    ].join('\n');
  }

  function job(url: string, n: number, overrides: Partial<ApplyPatchCommitInput> = {}): ApplyPatchCommitInput {
    return {
      repoUrl: url,
      branch: 'main',
      diff: addFile(`notes/job-${n}.txt`, `job ${n}`),
      jobId: `job-${n}`,
      message: `Job ${n}`,
      createdAt: '2026-03-01T12:00:00.000Z',
      workDir: root,
      ...overrides,
    };
  }

  /**
   * Passes requests to the real client, recording each as `METHOD /path?query` and the bodies of the
   * upload-pack POSTs (a fetch says `want <oid>`; a protocol v2 ref listing says `command=ls-refs`).
   */
  function recordingHttp(): HttpClient & {
    readonly requests: string[];
    readonly fetchBodies: string[];
    readonly fetches: () => number;
  } {
    const requests: string[] = [];
    const fetchBodies: string[] = [];
    return {
      requests,
      fetchBodies,
      fetches: () => fetchBodies.length,
      async request(req: GitHttpRequest) {
        const url = new URL(req.url);
        requests.push(`${req.method ?? 'GET'} /${url.pathname.split('/').pop()}${url.search}`);
        if (req.method === 'POST' && url.pathname.endsWith('/git-upload-pack') && req.body) {
          const chunks: Uint8Array[] = [];
          for await (const chunk of req.body) chunks.push(chunk);
          const body = Buffer.concat(chunks);
          if (body.toString('latin1').includes('want ')) fetchBodies.push(body.toString('latin1'));
          req = {
            ...req,
            body: (async function* () {
              yield body;
            })(),
          };
        }
        return nodeHttp.request(req);
      },
    };
  }

  async function newCache(maxBytes = 64 * 2 ** 20): Promise<{ cache: RepoCache; dir: string }> {
    const dir = await tempDir('cache-dir');
    return { cache: new RepoCache({ dir, maxBytes }), dir };
  }

  /** What the remote holds for `commit`: its raw bytes and its tree, read by the git CLI. */
  async function commitOnRemote(gitDir: string, commit: string): Promise<{ raw: string; tree: string }> {
    return {
      raw: await git(gitDir, 'cat-file', 'commit', commit),
      tree: await git(gitDir, 'rev-parse', `${commit}^{tree}`),
    };
  }

  test('cached and cold jobs push byte-identical commits, and a warm job fetches nothing', async () => {
    const warm = await freshRemote();
    const cold = await freshRemote();
    const { cache } = await newCache();
    const http = recordingHttp();
    const warmResults = [];
    const coldResults = [];
    for (let n = 1; n <= 3; n++) {
      const requestsBefore = http.requests.length;
      warmResults.push(await applyPatchCommit(job(warm.url, n), { cache, http }));
      // The first job fetches; the later ones find the remote's head (their own last push) in the
      // cache: they look at the remote once and push, reusing what they looked at.
      if (n > 1)
        expect(http.requests.slice(requestsBefore)).toEqual([
          'GET /refs?service=git-receive-pack',
          'POST /git-receive-pack',
        ]);
      else expect(http.fetches()).toBe(coldFetches(1));
      coldResults.push(await applyPatchCommit(job(cold.url, n)));
    }
    expect(warmResults.map((r) => r.commitSha)).toEqual(coldResults.map((r) => r.commitSha));
    for (const [i, { commitSha, parentSha }] of warmResults.entries()) {
      expect(await commitOnRemote(warm.gitDir, commitSha)).toEqual(await commitOnRemote(cold.gitDir, commitSha));
      expect((await commitOnRemote(warm.gitDir, commitSha)).tree).toBe(
        await gitApplyTree(warm.gitDir, parentSha, job(warm.url, i + 1).diff as string),
      );
    }
    expect(await git(warm.gitDir, 'rev-parse', 'main')).toBe(warmResults[2]?.commitSha);
    await git(warm.gitDir, 'fsck', '--strict', '--no-progress');
  });

  test('cached and cold jobs push byte-identical commits for edits, deletions that empty a directory and renames across directories, from a delta-compressed pack', async () => {
    // A remote whose objects are deltas of each other, so the fetched pack holds delta chains that
    // the object store must resolve, and patches that touch nested trees, prune and rename.
    const source = join(root, 'source-deltas');
    await mkdir(source);
    const body = (i: number) =>
      Array.from({ length: 50 }, (_, l) => (l === i % 50 ? `line ${i}` : `a line every file shares ${l}`)).join('\n');
    const files = Object.fromEntries(
      Array.from({ length: 48 }, (_, i) => [`lib/part${i % 4}/sub${i % 3}/file${i}.txt`, body(i)]),
    );
    const base = await createRepo(source, { ...files, 'lone/only.txt': 'the only file\n' });
    const remote = async (name: string) => {
      const gitDir = await server.importRepository(source, name);
      await git(gitDir, 'repack', '-a', '-d', '-f', '--depth=50', '--quiet');
      return { url: server.repoUrl(name), gitDir };
    };
    const first = await diffOfEdits(source, base, async (dir) => {
      await writeFiles(dir, { 'lib/part1/sub1/file1.txt': `${body(1)}\nedited`, 'lib/part2/new/added.txt': 'added\n' });
      await git(dir, 'rm', '--quiet', 'lone/only.txt');
      await git(dir, 'mv', 'lib/part3/sub0/file3.txt', 'lib/part0/moved.txt');
    });
    const second = await diffOfEdits(source, base, (dir) =>
      writeFiles(dir, { 'lib/part0/sub2/file8.txt': `${body(8)}\nedited again` }),
    );
    const warm = await remote('deltas-warm');
    const cold = await remote('deltas-cold');
    const { cache } = await newCache();
    const jobOf = (url: string, n: number, diff: string) => job(url, n, { diff, jobId: `delta-job-${n}` });
    const warmShas = [
      (await applyPatchCommit(jobOf(warm.url, 1, first), { cache })).commitSha,
      (await applyPatchCommit(jobOf(warm.url, 2, second), { cache })).commitSha,
    ];
    const coldShas = [
      (await applyPatchCommit(jobOf(cold.url, 1, first))).commitSha,
      (await applyPatchCommit(jobOf(cold.url, 2, second))).commitSha,
    ];
    expect(warmShas).toEqual(coldShas);
    for (const commitSha of warmShas)
      expect(await commitOnRemote(warm.gitDir, commitSha)).toEqual(await commitOnRemote(cold.gitDir, commitSha));
    expect((await commitOnRemote(warm.gitDir, warmShas[0] as string)).tree).toBe(
      await gitApplyTree(warm.gitDir, base, first),
    );
    expect((await commitOnRemote(warm.gitDir, warmShas[1] as string)).tree).toBe(
      await gitApplyTree(warm.gitDir, warmShas[0] as string, second),
    );
    await git(warm.gitDir, 'fsck', '--strict', '--no-progress');
  });

  test('a redelivery from the cache finds its commit and pushes nothing', async () => {
    const { url } = await freshRemote();
    const { cache } = await newCache();
    const first = await applyPatchCommit(job(url, 1), { cache });
    const http = recordingHttp();
    const again = await applyPatchCommit(job(url, 1), { cache, http });
    expect(again).toEqual({ ...first, alreadyApplied: true });
    expect(http.fetches()).toBe(0);
    // It only looked at the remote (one receive-pack discovery).
    expect(http.requests).toEqual(['GET /refs?service=git-receive-pack']);
  });

  test('a branch moved by another writer: the job fetches only what it lacks and applies on the new head', async () => {
    const { url, gitDir } = await freshRemote();
    const { cache } = await newCache();
    const first = await applyPatchCommit(job(url, 1), { cache });
    const other = await pushFromClone(gitDir, { 'other.txt': 'pushed by someone else\n' });
    const http = recordingHttp();
    const second = await applyPatchCommit(job(url, 2), { cache, http });
    expect(second.parentSha).toBe(other);
    expect((await commitOnRemote(gitDir, second.commitSha)).tree).toBe(
      await gitApplyTree(gitDir, other, job(url, 2).diff as string),
    );
    if (filters) {
      // By id: the other writer's commit (its history without trees), then only the trees the patch reads that the cache lacks.
      expect(http.fetchBodies[0]).toMatch(new RegExp(`want ${other}\n.*done`, 's'));
      expect(http.fetchBodies[0]).toContain('deepen 10');
      for (const body of http.fetchBodies) expect(body).toContain('filter tree:0');
      expect(http.fetchBodies.join('')).not.toContain(first.commitSha);
    } else {
      // One fetch, telling the remote what the cache has: only the other writer's commit comes back.
      expect(http.fetchBodies).toHaveLength(1);
      expect(http.fetchBodies[0]).toContain(`have ${first.commitSha}`);
    }
  });

  test('a branch rewritten on the remote (a force-push to another history) is followed, never the cached history', async () => {
    const { url, gitDir } = await freshRemote();
    const { cache } = await newCache();
    await applyPatchCommit(job(url, 1), { cache });
    await applyPatchCommit(job(url, 2), { cache });
    // Someone rewinds the branch and pushes an unrelated commit on top of the base.
    await git(gitDir, 'update-ref', 'refs/heads/main', baseSha);
    const rewritten = await pushFromClone(gitDir, { 'rewritten.txt': 'a new history\n' });
    const third = await applyPatchCommit(job(url, 3), { cache });
    expect(third.parentSha).toBe(rewritten);
    expect((await commitOnRemote(gitDir, third.commitSha)).tree).toBe(
      await gitApplyTree(gitDir, rewritten, job(url, 3).diff as string),
    );
    expect(await git(gitDir, 'show', `${third.commitSha}:notes/job-3.txt`)).toBe('job 3');
    await expect(git(gitDir, 'show', `${third.commitSha}:notes/job-1.txt`)).rejects.toThrow();
  });

  test('a tampered cache (its branch pointing at an old commit) cannot redirect a job', async () => {
    const { url, gitDir } = await freshRemote();
    const { cache, dir } = await newCache();
    const first = await applyPatchCommit(job(url, 1), { cache });
    await writeFile(join(dir, repoCacheKey(url, 'main'), 'refs', 'heads', 'main'), `${baseSha}\n`);
    const second = await applyPatchCommit(job(url, 2), { cache });
    expect(second.parentSha).toBe(first.commitSha);
    expect(await git(gitDir, 'rev-parse', 'main')).toBe(second.commitSha);
  });

  test('two workspaces at once and the same job twice at once (a lease takeover) each get a repository of their own', async () => {
    const a = await freshRemote();
    const b = await freshRemote();
    const { cache, dir } = await newCache();
    await applyPatchCommit(job(a.url, 1), { cache });
    await applyPatchCommit(job(b.url, 1), { cache });
    const [a2, a2again, b2] = await Promise.all([
      applyPatchCommit(job(a.url, 2), { cache }),
      applyPatchCommit(job(a.url, 2), { cache }),
      applyPatchCommit(job(b.url, 2), { cache }),
    ]);
    // The twin either pushed nothing or lost the compare-and-swap and found the winner's commit.
    expect(a2again.commitSha).toBe(a2.commitSha);
    expect([a2.alreadyApplied, a2again.alreadyApplied].sort()).toEqual([false, true]);
    expect(await git(a.gitDir, 'rev-list', '--count', `${baseSha}..main`)).toBe('2');
    expect(await git(b.gitDir, 'rev-parse', 'main')).toBe(b2.commitSha);
    // Everything leased went back or away: only idle repositories remain, and they still work.
    expect((await readdir(dir)).sort()).toEqual([repoCacheKey(a.url, 'main'), repoCacheKey(b.url, 'main')].sort());
    const a3 = await applyPatchCommit(job(a.url, 3), { cache });
    expect(a3.parentSha).toBe(a2.commitSha);
  });

  test('idle repositories stay within maxBytes, the least recently used removed first', async () => {
    const remotes = [await freshRemote(), await freshRemote(), await freshRemote()];
    const probe = await newCache();
    // The size of one repository after one job, on a remote of its own (a job found again would leave a smaller one).
    await applyPatchCommit(job((await freshRemote()).url, 1), { cache: probe.cache });
    const oneRepo = [...(await probe.cache.idle()).values()][0]!.bytes;
    // Room for two repositories of this size, not three.
    const { cache } = await newCache(Math.floor(oneRepo * 2.5));
    for (const remote of remotes) await applyPatchCommit(job(remote.url, 1), { cache });
    const idle = await cache.idle();
    expect([...idle.keys()].sort()).toEqual(
      [repoCacheKey(remotes[1]!.url, 'main'), repoCacheKey(remotes[2]!.url, 'main')].sort(),
    );
    expect([...idle.values()].reduce((sum, m) => sum + m.bytes, 0)).toBeLessThanOrEqual(Math.floor(oneRepo * 2.5));
    // The evicted workspace starts cold again: it fetches.
    const http = recordingHttp();
    await applyPatchCommit(job(remotes[0]!.url, 2), { cache, http });
    // notes/ exists now: the root and notes/ are read.
    expect(http.fetches()).toBe(coldFetches(2));
  });

  /** Bytes of the files of a cached repository, the cache's own metadata file aside. */
  async function filesBytes(dir: string): Promise<number> {
    let total = 0;
    for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
      if (entry.isFile() && !(entry.parentPath === dir && entry.name === 'agent-jobs-cache.json'))
        total += (await stat(join(entry.parentPath, entry.name))).size;
    }
    return total;
  }

  test("a warm job adds the bytes it wrote to the repository's count, and what it fetched by id; after a whole fetch the repository is measured again", async () => {
    const { url, gitDir } = await freshRemote();
    const { cache, dir } = await newCache();
    const key = repoCacheKey(url, 'main');
    const repo = join(dir, key);
    const counted = async () => (await cache.idle()).get(key)?.bytes;
    await applyPatchCommit(job(url, 1), { cache });
    expect(await counted()).toBe(await filesBytes(repo));
    await applyPatchCommit(job(url, 2), { cache });
    expect(await counted()).toBe(await filesBytes(repo));
    // The count is carried from job to job, not measured again: one set wrong stays wrong by as much.
    const meta = JSON.parse(await readFile(join(repo, 'agent-jobs-cache.json'), 'utf8')) as { bytes: number };
    await writeFile(join(repo, 'agent-jobs-cache.json'), JSON.stringify({ ...meta, bytes: 1000 }));
    const before = await filesBytes(repo);
    await applyPatchCommit(job(url, 3), { cache });
    expect(await counted()).toBe(1000 + (await filesBytes(repo)) - before);
    // What the cache holds is a repository git reads: the packs the jobs kept, their indexes and the branch.
    await git(repo, 'fsck', '--strict', '--no-progress', '--no-dangling');
    expect(await git(repo, 'rev-parse', 'refs/heads/main')).toBe(await git(gitDir, 'rev-parse', 'main'));
    // A fetch by id is counted as what it wrote; a whole fetch (isomorphic-git's) is not: the repository is measured.
    await pushFromClone(gitDir, { 'other.txt': 'pushed by someone else\n' });
    const [countedBefore, bytesBefore] = [await counted(), await filesBytes(repo)];
    await applyPatchCommit(job(url, 4), { cache });
    expect(await counted()).toBe(
      fetchCounted ? (countedBefore as number) + (await filesBytes(repo)) - bytesBefore : await filesBytes(repo),
    );
    expect(await filesBytes(repo)).toBeGreaterThan(bytesBefore);
  });

  test('a job that fails on I/O leaves nothing in the cache; the next job starts cold and succeeds', async () => {
    const { url } = await freshRemote();
    const { cache, dir } = await newCache();
    await applyPatchCommit(job(url, 1), { cache });
    const failing: HttpClient = {
      async request(req) {
        if (req.method === 'POST' && req.url.endsWith('/git-receive-pack'))
          throw Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
        return nodeHttp.request(req);
      },
    };
    await expect(applyPatchCommit(job(url, 2), { cache, http: failing })).rejects.toBeInstanceOf(TransientJobError);
    expect(await readdir(dir)).toEqual([]);
    const http = recordingHttp();
    const retried = await applyPatchCommit(job(url, 2), { cache, http });
    expect(retried.alreadyApplied).toBe(false);
    expect(http.fetches()).toBe(coldFetches(2));
  });

  test("leftovers of a process that is gone are removed; a live owner's are left alone", async () => {
    const { cache, dir } = await newCache();
    const key = repoCacheKey('http://example.invalid/x.git', 'main');
    const deadPid = 2 ** 22 + 17; // above Linux's pid_max
    await mkdir(join(dir, `${key}.busy-${deadPid}-0123456789ab`));
    await mkdir(join(dir, `.trash-${deadPid}-0123456789ab-1`));
    await mkdir(join(dir, `${key}.busy-${process.ppid}-0123456789ab`));
    // An idle repository without readable metadata cannot be accounted for: it goes too.
    await mkdir(join(dir, key));
    const { url } = await freshRemote();
    await applyPatchCommit(job(url, 1), { cache });
    expect((await readdir(dir)).sort()).toEqual(
      [`${key}.busy-${process.ppid}-0123456789ab`, repoCacheKey(url, 'main')].sort(),
    );
  });
});

/** Pushes a commit adding `files` on top of the remote's main with the git CLI; returns its sha. */
async function pushFromClone(gitDir: string, files: Record<string, string>): Promise<string> {
  const work = await tempDir('cache-clone');
  try {
    await git(work, 'clone', '--quiet', gitDir, '.');
    await writeFiles(work, files);
    await git(work, 'add', '--all');
    await git(work, 'commit', '--quiet', '--message', 'another writer');
    await git(work, 'push', '--quiet', 'origin', 'main');
    return await git(work, 'rev-parse', 'HEAD');
  } finally {
    await removeDir(work);
  }
}
