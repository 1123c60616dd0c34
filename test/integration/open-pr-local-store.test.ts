import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mkdir } from 'node:fs/promises';
import { resolveBranchHead } from '../../src/adapters/git';
import { startGitServer } from '../../tools/local/git-server';
import { LocalPullRequestStore, PR_STORE_FILE } from '../../tools/local/pr-store';
import { createRepo, git } from '../support/git-fixtures';

describe('LocalPullRequestStore', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pr-store-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const pr = (repoUrl: string, head: string) => ({ repoUrl, head, base: 'main', title: `PR for ${head}` });
  /** These cases are about numbering and storage: every branch exists (the branch check has its own case below). */
  const everyBranch = { branchHead: async () => 'a'.repeat(40) };

  it('creates once per (repository, head) and numbers per repository', async () => {
    const store = new LocalPullRequestStore(join(dir, 'state'), everyBranch);

    const first = await store.findOrCreate(pr('http://127.0.0.1:9/acme/widgets.git', 'agent/ws-1'));
    const again = await store.findOrCreate(pr('http://127.0.0.1:9/acme/widgets.git', 'agent/ws-1'));
    const second = await store.findOrCreate(pr('http://127.0.0.1:9/acme/widgets.git', 'agent/ws-2'));
    const otherRepo = await store.findOrCreate(pr('http://127.0.0.1:9/acme/gadgets.git', 'agent/ws-1'));

    expect(first).toEqual({ number: 1, url: 'http://127.0.0.1:9/acme/widgets/pull/1', created: true });
    expect(again).toEqual({ ...first, created: false });
    expect(second).toMatchObject({ number: 2, created: true });
    expect(otherRepo).toMatchObject({ number: 1, created: true });
  });

  it('creates one PR when the same head is asked for concurrently', async () => {
    const store = new LocalPullRequestStore(dir, everyBranch);

    const results = await Promise.all(
      Array.from({ length: 5 }, () => store.findOrCreate(pr('http://h/o/r.git', 'agent/ws-1'))),
    );

    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.number))).toEqual(new Set([1]));
    await expect(store.list()).resolves.toHaveLength(1);
  });

  it('keeps its pull requests across instances (the CLI reads what the platform wrote), with no temp files left', async () => {
    await new LocalPullRequestStore(dir, everyBranch).findOrCreate({
      ...pr('http://h/o/r.git', 'agent/ws-1'),
      body: 'details',
    });

    const reader = new LocalPullRequestStore(dir, everyBranch);

    await expect(reader.get('http://h/o/r.git', 1)).resolves.toMatchObject({
      head: 'agent/ws-1',
      base: 'main',
      body: 'details',
      state: 'open',
    });
    await expect(reader.get('http://h/o/r.git', 2)).resolves.toBeUndefined();
    await expect(reader.list('http://h/other.git')).resolves.toEqual([]);
    expect(readdirSync(dir)).toEqual([PR_STORE_FILE]);
  });

  it('refuses, like GitHub, a pull request whose base or head branch the repository on the git server lacks', async () => {
    const server = await startGitServer({ root: join(dir, 'remotes') });
    try {
      const src = join(dir, 'src');
      await mkdir(src);
      await createRepo(src, { 'README.md': 'x\n' });
      await git(src, 'branch', 'agent/ws-1');
      await server.importRepository(src, 'widgets');
      const store = new LocalPullRequestStore(join(dir, 'state'), {
        branchHead: (url, branch) => resolveBranchHead(url, branch),
      });
      const repoUrl = server.repoUrl('widgets');
      const validation = (field: string) =>
        `(422): Validation Failed; {"resource":"PullRequest","field":"${field}","code":"invalid"}`;

      await expect(store.findOrCreate({ ...pr(repoUrl, 'agent/ws-1'), base: 'release' })).rejects.toMatchObject({
        reason: 'REJECTED_BY_TARGET',
        message: expect.stringContaining(validation('base')),
      });
      await expect(store.findOrCreate(pr(repoUrl, 'agent/gone'))).rejects.toMatchObject({
        reason: 'REJECTED_BY_TARGET',
        message: expect.stringContaining(validation('head')),
      });
      await expect(store.list()).resolves.toEqual([]);
      await expect(store.findOrCreate(pr(repoUrl, 'agent/ws-1'))).resolves.toMatchObject({ number: 1, created: true });
    } finally {
      await server.close();
    }
  });
});
