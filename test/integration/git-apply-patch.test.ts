/**
 * applyPatchCommit against the loopback git server (git http-backend over bare repositories made
 * with the git CLI). Results are compared with what `git apply --index` makes of the same diff,
 * and the remote is inspected with the git CLI.
 */
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { HttpClient } from 'isomorphic-git';
import nodeHttp from 'isomorphic-git/http/node';
import { applyPatchCommit, resolveBranchHead, type ApplyPatchCommitInput } from '../../src/adapters/git';
import { PermanentJobError, TransientJobError } from '../../src/core/errors';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import {
  commitFiles,
  commitRawEntry,
  createRepo,
  diffOfEdits,
  git,
  gitApplyTree,
  removeDir,
  tempDir,
  writeFiles,
  type FileSpec,
} from '../support/git-fixtures';

const BASE_FILES: Record<string, FileSpec> = {
  'README.md': '# demo\n\nhello\n',
  'src/app.ts': Array.from({ length: 40 }, (_, i) => `export const v${i} = ${i};\n`).join(''),
  'crlf.txt': 'one\r\ntwo\r\nthree\r\n',
  'no-eol.txt': 'first\nlast line without newline',
  'old-name.txt': Array.from({ length: 30 }, (_, i) => `line ${i}\n`).join(''),
  'pure-rename.txt': 'moved as is\n',
  'doomed.txt': 'delete me\n',
  'run.sh': '#!/bin/sh\necho hi\n',
  'docs/sp ace é.md': 'unicode name\n',
  'bom.txt': '\ufeffwith bom\n',
  'empty.txt': '',
  'lib/only.ts': 'the only file in lib\n',
  link: { content: 'src', mode: 'symlink' },
};

let root: string;
let server: GitServer;
let sourceDir: string;
let baseSha: string;
let scratch: string;
let repoCount = 0;

beforeAll(async () => {
  root = await tempDir('git-root');
  scratch = await tempDir('git-work');
  sourceDir = await tempDir('git-source');
  baseSha = await createRepo(sourceDir, BASE_FILES);
  server = await startGitServer({ root: join(root, 'repos') });
});

afterAll(async () => {
  await server.close();
  await Promise.all([root, scratch, sourceDir].map(removeDir));
});

/** A fresh remote repository holding the base commit on `main`. */
async function freshRemote(): Promise<{ url: string; gitDir: string }> {
  const name = `ws-${++repoCount}`;
  const gitDir = await server.importRepository(sourceDir, name);
  return { url: server.repoUrl(name), gitDir };
}

function input(url: string, diff: string, overrides: Partial<ApplyPatchCommitInput> = {}): ApplyPatchCommitInput {
  return {
    repoUrl: url,
    branch: 'main',
    diff,
    baseSha,
    jobId: 'job-1',
    message: 'Apply the agent edit',
    createdAt: '2026-03-01T12:00:00.000Z',
    workDir: scratch,
    ...overrides,
  };
}

const remoteHead = (gitDir: string) => git(gitDir, 'rev-parse', 'refs/heads/main');
const commitsSinceBase = async (gitDir: string) => Number(await git(gitDir, 'rev-list', '--count', `${baseSha}..main`));

async function rejectionOf(promise: Promise<unknown>): Promise<PermanentJobError> {
  const outcome = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!(outcome instanceof PermanentJobError)) throw new Error(`expected a PermanentJobError, got ${String(outcome)}`);
  return outcome;
}

/** Every kind of edit an agent makes, as a real `git diff`. */
const fullDiff = () =>
  diffOfEdits(sourceDir, baseSha, async (dir) => {
    await writeFiles(dir, {
      'README.md': '# demo\n\nhello, agent\n',
      'src/app.ts': Array.from(
        { length: 40 },
        (_, i) => `export const v${i} = ${i === 3 || i === 30 ? i * 10 : i};\n`,
      ).join(''),
      'crlf.txt': 'one\r\nTWO\r\nthree\r\n',
      'no-eol.txt': 'first\nstill no newline',
      'new/dir/file.txt': 'brand new\n',
      'new-file ünï.txt': 'quoted name\n',
      'docs/sp ace é.md': 'unicode name, edited\n',
      'bom.txt': '\ufeffwith bom, edited\n',
      'run.sh': { content: '#!/bin/sh\necho hi\n', mode: 'exec' },
    });
    await git(dir, 'rm', '--quiet', 'doomed.txt');
    await mkdir(join(dir, 'moved'));
    await git(dir, 'mv', 'pure-rename.txt', 'moved/pure.txt');
    await git(dir, 'mv', 'old-name.txt', 'new-name.txt');
    await writeFiles(dir, {
      'new-name.txt': Array.from({ length: 30 }, (_, i) => `line ${i === 15 ? 'fifteen' : i}\n`).join(''),
    });
  });

describe('applyPatchCommit', () => {
  test('commits the same tree as `git apply --index`, with the trailer, and the remote passes fsck --strict', async () => {
    const { url, gitDir } = await freshRemote();
    const diff = await fullDiff();
    expect(diff).toMatch(/rename from old-name.txt/);
    expect(diff).toMatch(/old mode 100644\nnew mode 100755/);
    expect(diff).toMatch(/\\ No newline at end of file/);
    expect(diff).toMatch(/"b\/new-file \\303\\274n\\303\\257.txt"/);

    const result = await applyPatchCommit(input(url, diff));

    expect(result).toEqual({ commitSha: await remoteHead(gitDir), parentSha: baseSha, alreadyApplied: false });
    expect(await git(gitDir, 'rev-parse', 'main^{tree}')).toBe(await gitApplyTree(gitDir, baseSha, diff));
    expect(await git(gitDir, 'log', '-1', '--format=%B', 'main')).toBe('Apply the agent edit\n\nAgent-Job-Id: job-1\n');
    expect(await git(gitDir, 'log', '-1', '--format=%an <%ae> %aI %cI', 'main')).toBe(
      'agent-jobs <agent-jobs@users.noreply.github.com> 2026-03-01T12:00:00+00:00 2026-03-01T12:00:00+00:00',
    );
    expect(await commitsSinceBase(gitDir)).toBe(1);
    await git(gitDir, 'fsck', '--strict', '--no-progress');
  });

  test.each<{ what: string; edit: (dir: string) => Promise<unknown>; diffOptions?: string[] }>([
    {
      what: 'a file becomes a directory',
      edit: async (dir) => {
        await git(dir, 'rm', '--quiet', 'doomed.txt');
        await writeFiles(dir, { 'doomed.txt/inside.txt': 'now a directory\n' });
      },
    },
    { what: 'a directory loses its last file and disappears', edit: (dir) => git(dir, 'rm', '--quiet', 'lib/only.ts') },
    {
      what: 'empty files are added and deleted',
      edit: async (dir) => {
        await git(dir, 'rm', '--quiet', 'empty.txt');
        await writeFiles(dir, { 'new-empty.txt': '' });
      },
    },
    {
      what: 'a copy with an edit (git diff -C)',
      edit: (dir) =>
        writeFiles(dir, {
          'copy-of-old.txt': Array.from({ length: 30 }, (_, i) => `line ${i === 2 ? 'two' : i}\n`).join(''),
        }),
      diffOptions: ['-C', '--find-copies-harder'],
    },
  ])('$what: same tree as `git apply --index`', async ({ edit, diffOptions }) => {
    const { url, gitDir } = await freshRemote();
    const diff = await diffOfEdits(sourceDir, baseSha, async (dir) => void (await edit(dir)), diffOptions);
    await applyPatchCommit(input(url, diff));
    expect(await git(gitDir, 'rev-parse', 'main^{tree}')).toBe(await gitApplyTree(gitDir, baseSha, diff));
    await git(gitDir, 'fsck', '--strict', '--no-progress');
  });

  test('a new file that already exists is PATCH_DOES_NOT_APPLY', async () => {
    const { url, gitDir } = await freshRemote();
    const diff =
      'diff --git a/README.md b/README.md\nnew file mode 100644\n--- /dev/null\n+++ b/README.md\n@@ -0,0 +1 @@\n+again\n';
    const error = await rejectionOf(applyPatchCommit(input(url, diff)));
    expect(error.reason).toBe('PATCH_DOES_NOT_APPLY');
    expect(error.message).toMatch(/"README.md": file already exists/);
    expect(await remoteHead(gitDir)).toBe(baseSha);
  });

  test('the same base + diff + jobId give the same commit hash in separate clones', async () => {
    const diff = await fullDiff();
    const first = await freshRemote();
    const second = await freshRemote();
    const a = await applyPatchCommit(input(first.url, diff, { author: { name: 'Agent', email: 'agent@example.com' } }));
    const b = await applyPatchCommit(
      input(second.url, diff, { author: { name: 'Agent', email: 'agent@example.com' } }),
    );
    expect(a.commitSha).toBe(b.commitSha);
    expect(await remoteHead(second.gitDir)).toBe(a.commitSha);
  });

  test('a redelivery finds the trailer commit, even below later commits, and pushes nothing', async () => {
    const { url, gitDir } = await freshRemote();
    const diff = await fullDiff();
    const first = await applyPatchCommit(input(url, diff));

    const again = await applyPatchCommit(input(url, diff));
    expect(again).toEqual({ commitSha: first.commitSha, parentSha: baseSha, alreadyApplied: true });
    expect(await commitsSinceBase(gitDir)).toBe(1);

    // A later job lands on top; the first job is redelivered with its original base.
    const later = await diffOfEdits(gitDir, first.commitSha, (dir) => writeFiles(dir, { 'later.txt': 'later\n' }));
    const second = await applyPatchCommit(input(url, later, { jobId: 'job-2', baseSha: first.commitSha }));
    const late = await applyPatchCommit(input(url, diff));
    expect(late).toEqual({ commitSha: first.commitSha, parentSha: baseSha, alreadyApplied: true });
    expect(await remoteHead(gitDir)).toBe(second.commitSha);
    expect(await commitsSinceBase(gitDir)).toBe(2);
  });

  test('the search for the trailer deepens a shallow history when it has to', async () => {
    const { url, gitDir } = await freshRemote();
    const diff = await diffOfEdits(sourceDir, baseSha, (dir) => writeFiles(dir, { 'deep.txt': 'deep\n' }));
    const applied = await applyPatchCommit(input(url, diff));
    // Twelve more commits on top, then a redelivery without a base: the first fetch (depth 3) does not reach it.
    const work = await tempDir('deep');
    try {
      await git(work, 'clone', '--quiet', gitDir, '.');
      for (let i = 0; i < 12; i++) await commitFiles(work, { [`f${i}.txt`]: `${i}\n` }, `commit ${i}`);
      await git(work, 'push', '--quiet', 'origin', 'main');
    } finally {
      await removeDir(work);
    }
    const again = await applyPatchCommit(input(url, diff, { baseSha: undefined }), { fetchDepth: 3 });
    expect(again).toMatchObject({ commitSha: applied.commitSha, alreadyApplied: true });
    expect(await commitsSinceBase(gitDir)).toBe(13);
  });

  test('without a base, the patch goes on the current head', async () => {
    const { url, gitDir } = await freshRemote();
    const work = await tempDir('nobase');
    let head: string;
    try {
      await git(work, 'clone', '--quiet', gitDir, '.');
      head = await commitFiles(work, { 'other.txt': 'someone else\n' }, 'other');
      await git(work, 'push', '--quiet', 'origin', 'main');
    } finally {
      await removeDir(work);
    }
    const diff = await diffOfEdits(sourceDir, baseSha, (dir) =>
      writeFiles(dir, { 'README.md': '# demo\n\nhello again\n' }),
    );
    const result = await applyPatchCommit(input(url, diff, { baseSha: undefined }));
    expect(result).toMatchObject({ parentSha: head, alreadyApplied: false });
    expect(await git(gitDir, 'show', 'main:README.md')).toBe('# demo\n\nhello again');
  });

  test('a base that is not the branch head is BASE_MISMATCH', async () => {
    const { url, gitDir } = await freshRemote();
    const diff = await fullDiff();
    const error = await rejectionOf(applyPatchCommit(input(url, diff, { baseSha: 'a'.repeat(40) })));
    expect(error.reason).toBe('BASE_MISMATCH');
    expect(error.message).toContain(baseSha);
    expect(await remoteHead(gitDir)).toBe(baseSha);
  });

  test('a hunk that does not match is PATCH_DOES_NOT_APPLY naming the file, and the remote is unchanged', async () => {
    const { url, gitDir } = await freshRemote();
    const diff = (await fullDiff()).replace('-export const v30 = 30;', '-export const v30 = 31;');
    const error = await rejectionOf(applyPatchCommit(input(url, diff)));
    expect(error.reason).toBe('PATCH_DOES_NOT_APPLY');
    expect(error.message).toMatch(/"src\/app.ts": hunk 2 of 2/);
    expect(await remoteHead(gitDir)).toBe(baseSha);
  });

  test.each([
    [
      'adds a file through the committed symlink',
      'diff --git a/link/evil.txt b/link/evil.txt\nnew file mode 100644\n--- /dev/null\n+++ b/link/evil.txt\n@@ -0,0 +1 @@\n+x\n',
      /walks through the committed symlink "link"/,
    ],
    [
      'edits a file through the committed symlink',
      'diff --git a/link/app.ts b/link/app.ts\n--- a/link/app.ts\n+++ b/link/app.ts\n@@ -1 +1 @@\n-export const v0 = 0;\n+export const v0 = 1;\n',
      /walks through the committed symlink "link"/,
    ],
    [
      'edits the symlink itself as a file',
      'diff --git a/link b/link\n--- a/link\n+++ b/link\n@@ -1 +1 @@\n-src\n\\ No newline at end of file\n+/etc\n\\ No newline at end of file\n',
      /is a committed symlink/,
    ],
  ])('a patch that %s is UNSAFE_PATCH and nothing is pushed', async (_what, diff, rule) => {
    const { url, gitDir } = await freshRemote();
    const error = await rejectionOf(applyPatchCommit(input(url, diff)));
    expect(error.reason).toBe('UNSAFE_PATCH');
    expect(error.message).toMatch(rule);
    expect(await remoteHead(gitDir)).toBe(baseSha);
  });

  test('a hostile patch is refused before any request to the remote', async () => {
    const requests: string[] = [];
    const counting: HttpClient = { request: (req) => (requests.push(req.url), nodeHttp.request(req)) };
    const { url } = await freshRemote();
    const error = await rejectionOf(
      applyPatchCommit(input(url, 'diff --git a/../x b/../x\n--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n'), {
        http: counting,
      }),
    );
    expect(error.reason).toBe('UNSAFE_PATCH');
    expect(requests).toEqual([]);
  });

  test.each([
    ['".git." (the git library refused it only after fetching)', '.git./config'],
    ['the NTFS short name "GIT~1"', 'GIT~1/config'],
    ['".g<ZWNJ>it" (".git" on macOS)', '.g\u200cit/config'],
    ['a 300-byte name (committed before, and no clone could check it out)', 'x'.repeat(300)],
  ])('a name no clone can check out, %s, is UNSAFE_PATCH before any request', async (_what, path) => {
    const requests: string[] = [];
    const counting: HttpClient = { request: (req) => (requests.push(req.url), nodeHttp.request(req)) };
    const { url, gitDir } = await freshRemote();
    const diff = `diff --git a/${path} b/${path}\nnew file mode 100644\n--- /dev/null\n+++ b/${path}\n@@ -0,0 +1 @@\n+x\n`;
    const error = await rejectionOf(applyPatchCommit(input(url, diff), { http: counting }));
    expect(error.reason).toBe('UNSAFE_PATCH');
    expect(requests).toEqual([]);
    expect(await remoteHead(gitDir)).toBe(baseSha);
  });

  test('a new name that is an existing file on macOS and Windows (README.md / readme.md) is UNSAFE_PATCH', async () => {
    const { url, gitDir } = await freshRemote();
    const diff =
      'diff --git a/readme.md b/readme.md\nnew file mode 100644\n--- /dev/null\n+++ b/readme.md\n@@ -0,0 +1 @@\n+x\n';
    const error = await rejectionOf(applyPatchCommit(input(url, diff)));
    expect(error.reason).toBe('UNSAFE_PATCH');
    expect(error.message).toMatch(/"readme\.md" and "README\.md" differ only in case/);
    expect(await remoteHead(gitDir)).toBe(baseSha);
  });

  test('a new directory that is an existing one on macOS and Windows (Src/ next to src/) is UNSAFE_PATCH', async () => {
    const { url } = await freshRemote();
    const diff =
      'diff --git a/Src/new.ts b/Src/new.ts\nnew file mode 100644\n--- /dev/null\n+++ b/Src/new.ts\n@@ -0,0 +1 @@\n+x\n';
    expect((await rejectionOf(applyPatchCommit(input(url, diff)))).message).toMatch(
      /"Src" and "src" differ only in case/,
    );
  });

  test('unusual but valid authors, messages and times make commits that pass git fsck --strict', async () => {
    const { url, gitDir } = await freshRemote();
    const diff = await diffOfEdits(sourceDir, baseSha, (dir) => writeFiles(dir, { 'fsck.txt': 'x\n' }));
    await applyPatchCommit(
      input(url, diff, {
        author: { name: 'José O\'Brien "JB" 😀', email: 'jose+agent@example.com' },
        message: 'Fix\tit\r\n\r\nBody 😀\n',
        createdAt: '1970-01-01T00:00:00Z',
      }),
    );
    await git(gitDir, 'fsck', '--strict', '--no-progress');
    const object = await git(gitDir, 'cat-file', 'commit', 'main');
    expect(object).toContain('\nauthor José O\'Brien "JB" 😀 <jose+agent@example.com> 0 +0000\n');
    // isomorphic-git writes the message's line breaks as LF, as git's own message cleanup does.
    expect(object.endsWith('\n\nFix\tit\n\nBody 😀\n\nAgent-Job-Id: job-1')).toBe(true);
  });

  test.each([
    [
      'an author name that injects a header',
      { author: { name: 'Eve\ncommitter Mallory <m@example.com> 0 +0000', email: 'eve@example.com' } },
      /author\.name/,
    ],
    ['an e-mail that closes the bracket', { author: { name: 'Eve', email: 'eve@example.com>' } }, /author\.email/],
    ['a message with NUL hiding the trailer', { message: 'fix\0hidden' }, /message: must not contain NUL/],
    ['a time before the epoch', { createdAt: '1900-01-01T00:00:00Z' }, /createdAt: must be 1970-01-01 or later/],
    ['the branch HEAD', { branch: 'HEAD' }, /branch: must name a branch, not HEAD/],
    ['the branch refs/heads/main', { branch: 'refs/heads/main' }, /branch: must be a branch name, not a ref/],
  ])(
    'a commit git fsck would flag, %s, is INVALID_JOB before any request, even past the envelope',
    async (_what, change, problem) => {
      const requests: string[] = [];
      const counting: HttpClient = { request: (req) => (requests.push(req.url), nodeHttp.request(req)) };
      const { url, gitDir } = await freshRemote();
      const error = await rejectionOf(applyPatchCommit(input(url, await fullDiff(), change), { http: counting }));
      expect(error.reason).toBe('INVALID_JOB');
      expect(error.message).toMatch(problem);
      expect(requests).toEqual([]);
      expect(await remoteHead(gitDir)).toBe(baseSha);
    },
  );

  test('a .gitattributes line git fsck refuses (2,048 bytes or more) is UNSAFE_PATCH; a normal one is committed', async () => {
    const { url, gitDir } = await freshRemote();
    const long = await diffOfEdits(sourceDir, baseSha, (dir) =>
      writeFiles(dir, { 'sub/.gitattributes': `*.txt text\n*.bin ${'a'.repeat(2_048)}\n` }),
    );
    const error = await rejectionOf(applyPatchCommit(input(url, long)));
    expect(error.reason).toBe('UNSAFE_PATCH');
    expect(error.message).toMatch(
      /"sub\/\.gitattributes": line 2 is 2054 bytes: git ignores \.gitattributes lines of 2,048 bytes or more/,
    );
    expect(await remoteHead(gitDir)).toBe(baseSha);

    const fine = await diffOfEdits(sourceDir, baseSha, (dir) =>
      writeFiles(dir, { '.gitattributes': `*.bin ${'a'.repeat(2_040)}\n` }),
    );
    await applyPatchCommit(input(url, fine, { jobId: 'job-attributes' }));
    await git(gitDir, 'fsck', '--strict', '--no-progress');
  });

  test('a pure rename of a file to .gitattributes is checked as well', async () => {
    const { url, gitDir } = await freshRemote();
    const longLine = await diffOfEdits(sourceDir, baseSha, (dir) =>
      writeFiles(dir, { 'attrs.txt': `${'a'.repeat(3_000)}\n` }),
    );
    const first = await applyPatchCommit(input(url, longLine, { jobId: 'job-long' }));
    const rename =
      'diff --git a/attrs.txt b/.gitattributes\nsimilarity index 100%\nrename from attrs.txt\nrename to .gitattributes\n';
    const error = await rejectionOf(
      applyPatchCommit(input(url, rename, { jobId: 'job-rename', baseSha: first.commitSha })),
    );
    expect(error.message).toMatch(/"\.gitattributes": line 1 is 3000 bytes/);
    expect(await remoteHead(gitDir)).toBe(first.commitSha);
  });

  test('a branch that moved to another commit before the push is BRANCH_DIVERGED, never overwritten', async () => {
    const { url, gitDir } = await freshRemote();
    const diff = await fullDiff();
    // Fault injection: someone else pushes between our look at the branch and our push.
    let moved: string | undefined;
    const interloper: HttpClient = {
      async request(req) {
        if (moved === undefined && req.method === 'POST' && req.url.endsWith('/git-receive-pack'))
          moved = await pushOtherCommit(gitDir);
        return nodeHttp.request(req);
      },
    };
    const error = await rejectionOf(applyPatchCommit(input(url, diff, { baseSha: undefined }), { http: interloper }));
    expect(error.reason).toBe('BRANCH_DIVERGED');
    expect(await remoteHead(gitDir)).toBe(moved);
  });

  test('a branch rewound before the push is BRANCH_DIVERGED: the push is a compare-and-swap on the fetched head', async () => {
    const { url, gitDir } = await freshRemote();
    const first = await applyPatchCommit(
      input(url, await diffOfEdits(sourceDir, baseSha, (dir) => writeFiles(dir, { 'one.txt': '1\n' })), {
        jobId: 'job-0',
      }),
    );
    const diff = await diffOfEdits(gitDir, first.commitSha, (dir) => writeFiles(dir, { 'two.txt': '2\n' }));
    // Fault injection: someone rewinds the branch to the base after our fetch. Our commit still
    // descends from the new value, so only the compare-and-swap stops it resurrecting job-0's commit.
    let rewound = false;
    const rewinder: HttpClient = {
      async request(req) {
        if (!rewound && req.method === 'POST' && req.url.endsWith('/git-receive-pack')) {
          await git(gitDir, 'update-ref', 'refs/heads/main', baseSha);
          rewound = true;
        }
        return nodeHttp.request(req);
      },
    };
    const error = await rejectionOf(
      applyPatchCommit(input(url, diff, { baseSha: first.commitSha }), { http: rewinder }),
    );
    expect(error.reason).toBe('BRANCH_DIVERGED');
    expect(await remoteHead(gitDir)).toBe(baseSha);
  });

  test('two jobs racing on the same base: exactly one wins, the other is BRANCH_DIVERGED', async () => {
    const { url, gitDir } = await freshRemote();
    const diffA = await diffOfEdits(sourceDir, baseSha, (dir) => writeFiles(dir, { 'a.txt': 'a\n' }));
    const diffB = await diffOfEdits(sourceDir, baseSha, (dir) => writeFiles(dir, { 'b.txt': 'b\n' }));
    // Fault injection: a barrier holds both pushes until both jobs have fetched and committed,
    // so both send their ref update against the same old value and git's ref lock decides.
    let release!: () => void;
    const bothReady = new Promise<void>((resolve) => (release = resolve));
    let waiting = 0;
    const barrier: HttpClient = {
      async request(req) {
        if (req.method === 'POST' && req.url.endsWith('/git-receive-pack')) {
          if (++waiting === 2) release();
          await bothReady;
        }
        return nodeHttp.request(req);
      },
    };
    const outcomes = await Promise.allSettled([
      applyPatchCommit(input(url, diffA, { jobId: 'job-a' }), { http: barrier }),
      applyPatchCommit(input(url, diffB, { jobId: 'job-b' }), { http: barrier }),
    ]);
    const won = outcomes.filter((o) => o.status === 'fulfilled');
    const lost = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as PermanentJobError] : []));
    expect(won).toHaveLength(1);
    expect(lost.map((e) => e.reason)).toEqual(['BRANCH_DIVERGED']);
    expect(await commitsSinceBase(gitDir)).toBe(1);
    expect(await remoteHead(gitDir)).toBe(won[0]?.status === 'fulfilled' ? won[0].value.commitSha : undefined);
  });

  test('a push the remote refuses without the branch moving (a protected branch) is REJECTED_BY_TARGET, naming the refusal', async () => {
    const { url, gitDir } = await freshRemote();
    // git's own mechanism for a host-side refusal: a pre-receive hook run by http-backend's receive-pack.
    await writeFile(join(gitDir, 'hooks', 'pre-receive'), '#!/bin/sh\nexit 1\n', { mode: 0o755 });
    const error = await rejectionOf(applyPatchCommit(input(url, await fullDiff())));
    expect(error.reason).toBe('REJECTED_BY_TARGET');
    expect(error.message).toMatch(/refs\/heads\/main: pre-receive hook declined/);
    expect(await remoteHead(gitDir)).toBe(baseSha);
  });

  test('a branch that does not exist is BRANCH_NOT_FOUND, not a divergence', async () => {
    const { url } = await freshRemote();
    const error = await rejectionOf(applyPatchCommit(input(url, await fullDiff(), { branch: 'no-such-branch' })));
    expect(error.reason).toBe('BRANCH_NOT_FOUND');
    expect(error.message).toMatch(/branch no-such-branch does not exist on the remote/);
  });

  test('a branch of an empty repository (no commit at all) is BRANCH_NOT_FOUND too: its server still names its capabilities', async () => {
    const name = `empty-${++repoCount}`;
    await server.createBareRepo(name);
    const error = await rejectionOf(applyPatchCommit(input(server.repoUrl(name), await fullDiff())));
    expect(error.reason).toBe('BRANCH_NOT_FOUND');
  });

  test('an unreachable remote is a transient error and the scratch directory is removed', async () => {
    const closed = await startGitServer({ root: join(root, 'closed') });
    const url = closed.repoUrl('gone');
    await closed.close();
    const work = join(scratch, 'unreachable');
    await mkdir(work);
    await expect(applyPatchCommit(input(url, await fullDiff(), { workDir: work }))).rejects.toBeInstanceOf(
      TransientJobError,
    );
    expect(await readdir(work)).toEqual([]);
    await rm(work, { recursive: true });
  });
});

describe('applyPatchCommit: errors classified by cause, permanent when no retry can cure them', () => {
  test('a branch that holds a name the git library refuses (docs\\notes.md, pushed from elsewhere) is UNSAFE_PATCH, the remote unchanged', async () => {
    const { url, gitDir } = await freshRemote();
    const head = await commitRawEntry(gitDir, 'main', 'docs\\notes.md', 'written on Windows\n');
    const diff = await diffOfEdits(sourceDir, baseSha, (dir) => writeFiles(dir, { 'added.txt': 'x\n' }));

    const error = await rejectionOf(applyPatchCommit(input(url, diff, { baseSha: head })));

    expect(error.reason).toBe('UNSAFE_PATCH');
    expect(error.message).toMatch(/the git library refuses the path "docs\\\\notes\.md" as unsafe/);
    // The way out names the command that runs a failed job again, as BRANCH_NOT_FOUND's does.
    expect(error.message).toMatch(/remove it from the branch, then run the job again: agent-jobs dlq redrive <jobId>$/);
    expect(await remoteHead(gitDir)).toBe(head);
  });

  test('a remote that answers HTTP but not git is REJECTED_BY_TARGET, not a retry', async () => {
    const notGit = createServer((_req, res) =>
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>Sign in</body></html>'),
    );
    await new Promise<void>((resolve) => notGit.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = notGit.address() as AddressInfo;
      const error = await rejectionOf(
        applyPatchCommit(input(`http://127.0.0.1:${port}/acme/app.git`, await fullDiff())),
      );
      expect(error.reason).toBe('REJECTED_BY_TARGET');
      expect(error.message).toMatch(
        /fetch main: the remote does not speak git's smart HTTP protocol: Remote did not reply using the "smart" HTTP protocol/,
      );
    } finally {
      await new Promise((resolve) => notGit.close(resolve));
    }
  });
});

describe('resolveBranchHead', () => {
  test('resolve the head of a branch, or undefined when it is missing', async () => {
    const { url } = await freshRemote();
    expect(await resolveBranchHead(url, 'main')).toBe(baseSha);
    expect(await resolveBranchHead(url, 'nope')).toBeUndefined();
  });
});

/** Pushes an unrelated commit on main with the git CLI; returns it. */
async function pushOtherCommit(gitDir: string): Promise<string> {
  const work = await tempDir('other');
  try {
    await git(work, 'clone', '--quiet', gitDir, '.');
    const sha = await commitFiles(work, { 'elsewhere.txt': 'moved\n' }, 'moved elsewhere');
    await git(work, 'push', '--quiet', 'origin', 'main');
    return sha;
  } finally {
    await removeDir(work);
  }
}
