/**
 * The object store (src/adapters/git/object-store.ts) against the git CLI: every object of a
 * repository git packed with deep delta chains reads back as `git cat-file` shows it, from the pack
 * and from loose objects; trees it writes are the ones `git mktree` makes of the same entries; the
 * pack it pushes is one `git index-pack` accepts, and the pack and index it keeps are the ones git
 * would write; commits are the bytes isomorphic-git's writeCommit wrote; a tree entry git refuses
 * is refused; and a pack received from a remote is indexed as `git index-pack` indexes it, its
 * objects named by their hashes, and kept as the promisor pack of a partial repository.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import * as isomorphicGit from 'isomorphic-git';
import {
  GitObjectStore,
  ObjectNotFoundError,
  UnsafeTreeEntryError,
  indexPack,
  serializeCommit,
  type NewCommit,
  type TreeEntry,
} from '../../src/adapters/git/object-store';
import { RemoteAnswerError } from '../../src/adapters/git/pkt-line';
import { GIT_ENV, commitFiles, createRepo, git, removeDir, tempDir } from '../support/git-fixtures';

let root: string;
let bare: string;

/** Runs git in `cwd` with `input` on stdin; stdout as bytes. */
async function gitBytes(cwd: string, args: string[], input?: string | Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      'git',
      args,
      { cwd, env: GIT_ENV, encoding: 'buffer', maxBuffer: 64 * 2 ** 20 },
      (error, stdout) => (error ? reject(error) : resolve(stdout)),
    );
    child.stdin?.on('error', () => undefined); // git may exit without reading it
    child.stdin?.end(input);
  });
}

/** `git ls-tree` of a tree, as the store's entries. */
async function lsTree(repo: string, oid: string): Promise<TreeEntry[]> {
  const out = (await gitBytes(repo, ['ls-tree', '-z', oid])).toString('utf8');
  return out
    .split('\0')
    .filter(Boolean)
    .map((line) => {
      const [meta, path] = line.split('\t') as [string, string];
      const [mode, type, entryOid] = meta.split(' ') as [string, TreeEntry['type'], string];
      return { mode, path, oid: entryOid, type };
    });
}

beforeAll(async () => {
  root = await tempDir('object-store');
  const work = join(root, 'work');
  await mkdir(work);
  // Similar files, edited over several commits, so git stores most of them as deltas of each other.
  const lines = (n: number, edit: string) =>
    Array.from({ length: 60 }, (_, l) => (l === n % 60 ? edit : `shared line ${l} of a file that deltas well`)).join(
      '\n',
    );
  const files = (round: number) =>
    Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [
        `dir${i % 4}/sub${i % 3}/file${i}.txt`,
        lines(i + round, `round ${round} file ${i}`),
      ]),
    );
  await createRepo(work, files(0));
  for (let round = 1; round <= 6; round++) await commitFiles(work, files(round), `round ${round}`);
  bare = join(root, 'bare.git');
  await git(root, 'clone', '--quiet', '--bare', '--no-local', work, bare);
  await git(bare, 'repack', '-a', '-d', '-f', '--window=50', '--depth=50', '--quiet');
}, 120_000);

afterAll(async () => {
  await removeDir(root);
});

/** Every object of the repository at `repo` with its type and content, from one `git cat-file --batch`. */
async function allObjects(repo: string): Promise<{ oid: string; type: string; content: Buffer }[]> {
  const out = await gitBytes(repo, ['cat-file', '--batch-all-objects', '--batch']);
  const objects = [];
  for (let at = 0; at < out.length;) {
    const newline = out.indexOf(10, at);
    const [oid, type, size] = out.subarray(at, newline).toString('ascii').split(' ') as [string, string, string];
    objects.push({ oid, type, content: out.subarray(newline + 1, newline + 1 + Number(size)) });
    at = newline + 1 + Number(size) + 1;
  }
  return objects;
}

test('reads every object of a pack with delta chains as git does', async () => {
  const deltas = await git(bare, 'cat-file', '--batch-all-objects', '--batch-check=%(deltabase)');
  // Not vacuous: most objects are stored as deltas.
  expect(deltas.split('\n').filter((base) => !/^0+$/.test(base)).length).toBeGreaterThan(deltas.split('\n').length / 2);
  const store = new GitObjectStore(bare, {});
  const objects = await allObjects(bare);
  for (const { oid, type, content } of objects) {
    if (type === 'blob') expect(Buffer.from(await store.readBlob(oid))).toEqual(content);
    // Parsed and written again, every tree is the same object: entries, modes and order as git has them.
    if (type === 'tree') expect(await store.writeTree(await store.readTree(oid))).toBe(oid);
    if (type === 'commit') {
      const raw = content.toString('utf8');
      const commit = await store.readCommit(oid);
      expect(await store.readTree(commit.tree)).toEqual(await lsTree(bare, commit.tree));
      expect(commit.message).toBe(raw.slice(raw.indexOf('\n\n') + 2));
      expect(commit.tree).toBe(await git(bare, 'rev-parse', `${oid}^{tree}`));
      expect(commit.parent).toEqual((await git(bare, 'rev-list', '--parents', '-n', '1', oid)).split(' ').slice(1));
    }
  }
  await expect(store.readBlob('0'.repeat(40))).rejects.toBeInstanceOf(ObjectNotFoundError);
  expect(await store.has('0'.repeat(40))).toBe(false);
});

test('keeps what it wrote as a pack and index git reads, trees in git order, and pushes that pack', async () => {
  const repo = join(root, 'written.git');
  await git(root, 'init', '--quiet', '--bare', repo);
  const store = new GitObjectStore(repo, {});
  const blob = await store.writeBlob(Buffer.from('hello\n'));
  const exec = await store.writeBlob(Buffer.from([0, 1, 2, 255]));
  const sub = await store.writeTree([{ mode: '100644', path: 'inner.txt', oid: blob, type: 'blob' }]);
  // Names whose order differs between plain sorting and git's (a tree sorts as if it ended with "/").
  const entries: TreeEntry[] = [
    { mode: '100644', path: 'foo.txt', oid: blob, type: 'blob' },
    { mode: '040000', path: 'foo', oid: sub, type: 'tree' },
    { mode: '100755', path: 'foo-bar', oid: exec, type: 'blob' },
    { mode: '100644', path: 'Foo', oid: blob, type: 'blob' },
    { mode: '100644', path: 'é.txt', oid: blob, type: 'blob' },
  ];
  const tree = await store.writeTree(entries);
  const mktree = entries.map((e) => `${e.mode} ${e.type} ${e.oid}\t${e.path}\n`).join('');
  expect(tree).toBe((await gitBytes(repo, ['mktree', '--missing'], mktree)).toString('utf8').trim());
  const commit = await store.writeCommit({
    tree,
    parent: [],
    author: IDENTITY,
    committer: IDENTITY,
    message: 'written\n',
  });
  // Nothing reaches the disk before keepPack.
  await expect(git(repo, 'cat-file', '-e', blob)).rejects.toThrow();

  const written = store.packWritten();
  expect(await store.keepPack(written)).toBe(written.pack.length + written.index.length);
  const packName = `pack-${written.checksum}`;
  // Checksums, CRCs and offsets: `verify-pack` checks them all, and the index is the one git writes for that pack.
  await git(repo, 'verify-pack', '-v', `objects/pack/${packName}.idx`);
  const reindexed = join(root, 'reindexed.pack');
  await fs.promises.copyFile(join(repo, 'objects', 'pack', `${packName}.pack`), reindexed);
  await git(root, 'index-pack', reindexed);
  expect(await fs.promises.readFile(join(root, 'reindexed.idx'))).toEqual(written.index);
  await git(repo, 'update-ref', 'refs/heads/main', commit);
  await git(repo, 'fsck', '--strict', '--no-progress', '--no-dangling');
  expect(await gitBytes(repo, ['cat-file', 'blob', exec])).toEqual(Buffer.from([0, 1, 2, 255]));
  expect(await store.readTree(tree)).toEqual(await lsTree(repo, tree));
  // A store that starts afresh reads the kept pack from the disk.
  const later = new GitObjectStore(repo, {});
  expect(await later.readCommit(commit)).toEqual({ tree, parent: [], message: 'written\n' });
  expect(Buffer.from(await later.readBlob(exec))).toEqual(Buffer.from([0, 1, 2, 255]));

  // The pack for a push is the same pack: readable by git's index-pack in another repository.
  const other = join(root, 'other.git');
  await git(root, 'init', '--quiet', '--bare', other);
  await gitBytes(other, ['index-pack', '--stdin', '--strict'], written.pack);
  for (const oid of [blob, exec, sub, tree, commit])
    expect(await git(other, 'cat-file', '-t', oid)).toMatch(/^(blob|tree|commit)$/);
});

const IDENTITY = { name: 'Fixture', email: 'fixture@example.invalid', timestamp: 1_767_225_600, timezoneOffset: 0 };

test('writes commits byte for byte as isomorphic-git writeCommit wrote them', async () => {
  const repo = join(root, 'commits.git');
  await git(root, 'init', '--quiet', '--bare', repo);
  const tree = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';
  const cases: NewCommit[] = [
    { tree, parent: [], author: IDENTITY, committer: IDENTITY, message: 'plain\n\nAgent-Job-Id: job-1\n' },
    // Carriage returns, leading and trailing newlines, no final newline, UTF-8: isomorphic-git normalises all of these.
    { tree, parent: [tree], author: IDENTITY, committer: IDENTITY, message: '\n\nline one\r\nline two\n\n\n' },
    { tree, parent: [tree, tree], author: { ...IDENTITY, name: 'Zoë Ü' }, committer: IDENTITY, message: 'no newline' },
    // Offsets west and east of UTC, not whole hours, and -0.
    {
      tree,
      parent: [],
      author: { ...IDENTITY, timezoneOffset: 300 },
      committer: { ...IDENTITY, timezoneOffset: -330 },
      message: 'zones\n',
    },
    {
      tree,
      parent: [],
      author: { ...IDENTITY, timezoneOffset: -0 },
      committer: { ...IDENTITY, timezoneOffset: 45 },
      message: 'zero\n',
    },
  ];
  for (const commit of cases) {
    const store = new GitObjectStore(repo, {});
    const expected = await isomorphicGit.writeCommit({
      fs,
      gitdir: repo,
      commit: { ...commit, parent: [...commit.parent] },
    });
    expect(await store.writeCommit(commit)).toBe(expected);
    expect(serializeCommit(commit)).toBe((await gitBytes(repo, ['cat-file', 'commit', expected])).toString('utf8'));
  }
});

test('refuses to read a tree holding a name git refuses, as isomorphic-git does', async () => {
  const repo = join(root, 'unsafe.git');
  await git(root, 'init', '--quiet', '--bare', repo);
  const store = new GitObjectStore(repo, {});
  const blob = await store.writeBlob(Buffer.from('x\n'));
  for (const name of [
    'docs\\notes.md',
    '...',
    '. .',
    '.GIT',
    '.git.',
    'git~1',
    '.g\u200cit',
    '.git::$INDEX_ALLOCATION',
  ]) {
    const tree = (await gitBytes(repo, ['mktree', '--missing'], `100644 blob ${blob}\t${name}\n`))
      .toString('utf8')
      .trim();
    await expect(new GitObjectStore(repo, {}).readTree(tree)).rejects.toEqual(new UnsafeTreeEntryError(name));
    await expect(isomorphicGit.readTree({ fs, gitdir: repo, oid: tree })).rejects.toBeInstanceOf(
      isomorphicGit.Errors.UnsafeFilepathError,
    );
  }
  for (const name of ['.gitignore', 'git~x', '..a', 'a.']) {
    const tree = (await gitBytes(repo, ['mktree', '--missing'], `100644 blob ${blob}\t${name}\n`))
      .toString('utf8')
      .trim();
    expect((await new GitObjectStore(repo, {}).readTree(tree)).map((e) => e.path)).toEqual([name]);
    expect((await isomorphicGit.readTree({ fs, gitdir: repo, oid: tree })).tree.map((e) => e.path)).toEqual([name]);
  }
});

describe('a pack received from a remote', () => {
  /** A pack of some of the repository's objects, with offset deltas or (without `--delta-base-offset`) ref deltas, as git sends them. */
  async function packOf(oids: readonly string[], offsetDeltas: boolean): Promise<Buffer> {
    return gitBytes(
      bare,
      ['pack-objects', '--stdout', '--window=50', '--depth=50', ...(offsetDeltas ? ['--delta-base-offset'] : [])],
      `${oids.join('\n')}\n`,
    );
  }
  const blobsAndTrees = async () => (await allObjects(bare)).filter((o) => o.type !== 'commit').map((o) => o.oid);

  test.each([
    ['offset deltas', true],
    ['ref deltas', false],
  ])(
    'with %s: indexed byte for byte as git index-pack indexes it, every object named by its hash',
    async (_what, offsetDeltas) => {
      const wanted = await blobsAndTrees();
      const pack = await packOf(wanted, offsetDeltas);
      const { index, checksum, oids } = indexPack(pack);
      const file = join(root, `received-${String(offsetDeltas)}.pack`);
      await fs.promises.writeFile(file, pack);
      await git(root, 'index-pack', file);
      expect(index).toEqual(await fs.promises.readFile(file.replace(/\.pack$/, '.idx')));
      expect(checksum).toBe(pack.subarray(-20).toString('hex'));
      expect([...oids].sort()).toEqual([...wanted].sort());
      // Not vacuous: the pack holds deltas of the kind named.
      const verified = await git(root, 'verify-pack', '-v', file.replace(/\.pack$/, '.idx'));
      expect(verified).toMatch(/chain length = \d+: \d+ objects?/);
    },
  );

  test('is kept with its index and a .promisor mark; objects are read from it, and what it lacks of what was asked is said', async () => {
    const repo = join(root, 'partial.git');
    await git(root, 'init', '--quiet', '--bare', repo);
    const trees = (await allObjects(bare)).filter((o) => o.type === 'tree').slice(0, 5);
    const pack = await packOf(
      trees.map((t) => t.oid),
      true,
    );
    const fetched: string[][] = [];
    const store = new GitObjectStore(repo, {}, async (oids) => {
      fetched.push([...oids]);
      expect(await store.keepReceived(pack, oids)).toEqual([]);
    });
    // A read the store cannot answer goes to the promisor, once, for what is missing only.
    expect(await store.readTree(trees[0]!.oid)).toEqual(await lsTree(bare, trees[0]!.oid));
    await store.prefetch(trees.map((t) => t.oid));
    expect(fetched).toEqual([[trees[0]!.oid]]);
    const name = `pack-${pack.subarray(-20).toString('hex')}`;
    expect((await fs.promises.readdir(join(repo, 'objects', 'pack'))).sort()).toEqual([
      `${name}.idx`,
      `${name}.pack`,
      `${name}.promisor`,
    ]);
    expect(await store.partial()).toBe(true);
    await git(repo, 'verify-pack', `objects/pack/${name}.idx`);
    // A commit is never fetched alone (its whole history would come): it is simply missing.
    const commit = (await allObjects(bare)).find((o) => o.type === 'commit')!.oid;
    await expect(store.readCommit(commit)).rejects.toBeInstanceOf(ObjectNotFoundError);
    expect(fetched).toHaveLength(1);
    // What a pack lacks of what was asked is said, for the caller to ask again.
    expect(await store.keepReceived(pack, [trees[1]!.oid, '0'.repeat(40)])).toEqual(['0'.repeat(40)]);
  });

  test('whose bytes do not match its checksum, or that ends early, is refused as not git', async () => {
    const pack = await packOf((await blobsAndTrees()).slice(0, 3), true);
    const flipped = Buffer.from(pack);
    flipped[20] = (flipped[20] as number) ^ 1;
    expect(() => indexPack(flipped)).toThrow(
      new RemoteAnswerError("the remote's pack does not match its checksum", 'malformed'),
    );
    expect(() => indexPack(pack.subarray(0, 30))).toThrow(RemoteAnswerError);
  });

  /** `pack` with its first entry's bytes changed by `edit` and its checksum made again: only its content is wrong. */
  function resealed(pack: Buffer, edit: (copy: Buffer, dataAt: number) => void): Buffer {
    const copy = Buffer.from(pack);
    let dataAt = 12;
    while ((copy[dataAt++] as number) & 0x80);
    edit(copy, dataAt);
    createHash('sha1')
      .update(copy.subarray(0, -20))
      .digest()
      .copy(copy, copy.length - 20);
    return copy;
  }

  test.each([
    [
      'an object of a type git does not define',
      (copy: Buffer) => void (copy[12] = ((copy[12] as number) & 0x8f) | (5 << 4)),
      /unknown type 5/,
    ],
    [
      'an object whose data is not deflated',
      (copy: Buffer, dataAt: number) => void (copy[dataAt] = 0xff),
      /incorrect header check/,
    ],
    [
      'an object longer or shorter than its header says',
      (copy: Buffer) => void (copy[12] = (copy[12] as number) ^ 1),
      /the header says/,
    ],
  ])('that matches its checksum but holds %s is refused as not git', async (_what, edit, says) => {
    const pack = await packOf((await blobsAndTrees()).slice(0, 3), true);
    const error = (() => {
      try {
        indexPack(resealed(pack, edit));
        return undefined;
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(RemoteAnswerError);
    expect(error).toMatchObject({ kind: 'malformed', message: expect.stringMatching(says) });
  });
});
