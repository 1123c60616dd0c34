/**
 * Applies validated file operations to a commit's tree by editing blobs and trees in the object
 * store directly: no checkout, so only the directories on the touched paths are read, and a large
 * repository costs neither disk nor file handles. What will be read is announced to the store a
 * few directory levels at a time (`preload`), so a partial repository fetches it in a few requests.
 */
import { PermanentJobError } from '../../core/errors';
import {
  applyHunks,
  caseClash,
  checkWrittenContent,
  decodePatchBytes,
  encodePatchText,
  fileMismatch,
  isCheckedContent,
  isFileMode,
  portableNameKey,
  unsafePatch,
  type FileMode,
  type FileOperation,
  type PatchHunk,
} from '../../core/patch';
import type { ObjectStore, TreeEntry } from './object-store';

const TREE_MODE = '040000';
const SYMLINK_MODE = '120000';

/**
 * Trees one request may bring, by estimate (see `levelsBelow`): about 1.2 MB of tree objects of 600
 * bytes, what a request's round trip to a git host costs in transfer at 100 Mbit/s, near enough.
 */
export const TREE_BUDGET = 2_048;

/**
 * How many levels below `wanted` trees to ask for with them: as many as the paths still need
 * (`needed`), while the estimate of what comes, `wanted × (1 + f + f² + …)` with `f` the subtrees
 * per directory seen on the paths one level up, stays within TREE_BUDGET. Nothing is known of the
 * width below the root's children (`f` = 0): one level then. In source trees the width shrinks with depth, so
 * the level above mostly over-estimates; where a narrow level sits on a wide one, the request may
 * bring more than the budget, never blobs (docs/decisions.md §40).
 */
export function levelsBelow(wanted: number, fanOut: number, needed: number): number {
  let levels = 0;
  for (let estimate = wanted, width = wanted; levels < needed && fanOut > 0; levels++) {
    width *= fanOut;
    if (estimate + width > TREE_BUDGET) break;
    estimate += width;
  }
  return levels;
}

/**
 * Levels of trees, from the root, that a cold job's first request brings with the head: all but
 * the last three its paths need, the rest coming in one request below the touched trees of that
 * level (`levelsBelow`), then the blobs: four requests with the receive-pack discovery, whatever
 * the depth. At least the root and its subtrees (the root's width says nothing of the level below
 * it, so `levelsBelow` never starts there), never more than the paths need. What this brings is
 * every tree of those top levels, bounded by the repository's shape there, not by TREE_BUDGET (at
 * 300,000 generated files, 389 trees).
 */
export function historyTreeLevels(paths: readonly string[]): number {
  const deepest = Math.max(0, ...paths.map((path) => path.split('/').length - 1));
  return Math.min(Math.max(deepest - 2, 2), deepest + 1, MAX_HISTORY_TREE_LEVELS);
}

/** Beyond this depth from the root, the top of a tree is wide enough that the history's request brings no more of it. */
const MAX_HISTORY_TREE_LEVELS = 6;

/** Every path `operations` touch: written, removed, and renamed or copied from. */
export function touchedPaths(operations: readonly FileOperation[]): string[] {
  return operations.flatMap((op) => (op.kind === 'rename' || op.kind === 'copy' ? [op.from, op.path] : [op.path]));
}

function doesNotApply(path: string, why: string): PermanentJobError {
  return new PermanentJobError('PATCH_DOES_NOT_APPLY', `patch does not apply: ${JSON.stringify(path)}: ${why}`, {
    repositoryData: fileMismatch(path),
  });
}

function split(path: string): { dir: string; name: string } {
  const slash = path.lastIndexOf('/');
  return slash < 0 ? { dir: '', name: path } : { dir: path.slice(0, slash), name: path.slice(slash + 1) };
}

/** A new name must not be one file with an existing one on macOS and Windows (`Readme` next to `README`). */
function refuseTwin(entries: ReadonlyMap<string, TreeEntry>, name: string, forPath: string): void {
  const key = portableNameKey(name);
  for (const other of entries.keys()) {
    if (other !== name && portableNameKey(other) === key) throw caseClash(forPath, name, other);
  }
}

/** A lazily loaded, mutable view of one tree; `write` stores the changed trees bottom-up. */
export class TreeEditor {
  /** Loaded directories by path ('' is the root). */
  private readonly dirs = new Map<string, Map<string, TreeEntry>>();
  private readonly dirty = new Set<string>();

  constructor(
    private readonly store: ObjectStore,
    private readonly rootTree: string,
  ) {}

  /**
   * Loads every existing directory on `paths`, a level at a time, and announces to the store what
   * will be read: the trees a level lacks, with the levels below them that the paths still need as
   * far as the estimate allows (`levelsBelow`), and the blobs of `contents` found so far, so a
   * partial repository makes one request per group of levels it lacks trees of (and one for the
   * blobs of the last) instead of one per object. A path stops where it meets anything but a
   * directory; the operation on it then says what is wrong.
   */
  async preload(paths: readonly string[], contents: readonly string[]): Promise<void> {
    const levels: Set<string>[] = [];
    for (const path of paths) {
      const parts = path.split('/');
      for (let depth = 0; depth < parts.length; depth++)
        (levels[depth] ??= new Set()).add(parts.slice(0, depth).join('/'));
    }
    const contentsByDir = new Map<string, string[]>();
    for (const path of contents) {
      const { dir, name } = split(path);
      contentsByDir.set(dir, [...(contentsByDir.get(dir) ?? []), name]);
    }
    let blobs: string[] = [];
    for (const [depth, level] of levels.entries()) {
      const trees: [string, string][] = [];
      for (const dir of level) {
        const oid = dir === '' ? this.rootTree : this.subtreeOid(dir);
        if (oid !== undefined && !this.dirs.has(dir)) trees.push([dir, oid]);
      }
      // Blobs wait for a level that lacks a tree, to go in its request; blobs first, because git
      // leaves out a wanted object that a tree wanted before it holds (upload-pack.ts).
      const lacking = await this.lacking(trees.map(([, oid]) => oid));
      if (lacking.length > 0) {
        const treeLevels = levelsBelow(lacking.length, this.fanOut(levels[depth - 1]), levels.length - 1 - depth);
        await this.store.prefetch([...blobs, ...lacking], { treeLevels });
        blobs = [];
      }
      for (const [dir, oid] of trees) await this.load(dir, oid);
      for (const dir of level) {
        for (const name of contentsByDir.get(dir) ?? []) {
          const entry = this.dirs.get(dir)?.get(name);
          if (entry?.type === 'blob' && isFileMode(entry.mode)) blobs.push(entry.oid);
        }
      }
    }
    await this.store.prefetch(blobs);
  }

  /**
   * Subtrees per directory among the loaded ones of `level`; 0 (nothing known of the width below)
   * when none is loaded, or for the root alone: one directory says little of the next level's width.
   */
  private fanOut(level: ReadonlySet<string> | undefined): number {
    if (level === undefined || level.has('')) return 0;
    const loaded = [...level].flatMap((dir) => this.dirs.get(dir) ?? []);
    if (loaded.length === 0) return 0;
    return (
      loaded.reduce((sum, entries) => sum + [...entries.values()].filter((e) => e.type === 'tree').length, 0) /
      loaded.length
    );
  }

  private async lacking(oids: readonly string[]): Promise<string[]> {
    const lacking: string[] = [];
    for (const oid of oids) if (!(await this.store.has(oid))) lacking.push(oid);
    return lacking;
  }

  /** The id of directory `dir` when its parent is loaded and holds it as a tree. */
  private subtreeOid(dir: string): string | undefined {
    const { dir: parent, name } = split(dir);
    const entry = this.dirs.get(parent)?.get(name);
    return entry?.type === 'tree' ? entry.oid : undefined;
  }

  /** The regular file at `path` in the current state of the tree. */
  async readFile(path: string): Promise<{ oid: string; mode: FileMode }> {
    const { dir, name } = split(path);
    const entries = await this.directory(dir, path, false);
    const entry = entries?.get(name);
    if (!entry) throw doesNotApply(path, 'file does not exist');
    if (entry.type === 'tree') throw doesNotApply(path, 'is a directory');
    if (!isFileMode(entry.mode))
      throw unsafePatch(path, entry.mode === SYMLINK_MODE ? 'is a committed symlink' : `has mode ${entry.mode}`);
    return { oid: entry.oid, mode: entry.mode };
  }

  async removeFile(path: string): Promise<void> {
    await this.readFile(path);
    const { dir, name } = split(path);
    this.dirs.get(dir)?.delete(name);
    this.markDirty(dir);
    this.pruneEmpty(dir);
  }

  /** Writes a file; with `create` the path must be free (as `git apply` requires for new files). */
  async writeFile(path: string, file: { oid: string; mode: FileMode }, create: boolean): Promise<void> {
    const { dir, name } = split(path);
    const entries = await this.directory(dir, path, true);
    if (!entries) throw doesNotApply(path, 'parent directory cannot be created');
    const existing = entries.get(name);
    if (existing?.type === 'tree') throw doesNotApply(path, 'a directory of that name exists');
    if (create && existing) throw doesNotApply(path, 'file already exists');
    if (!existing) refuseTwin(entries, name, path);
    entries.set(name, { mode: file.mode, path: name, oid: file.oid, type: 'blob' });
    this.markDirty(dir);
  }

  /** Stores every changed tree and returns the new root tree id. */
  async write(): Promise<string> {
    const deepestFirst = [...this.dirty].sort(
      (a, b) => b.split('/').length - a.split('/').length || b.length - a.length,
    );
    let root = this.rootTree;
    for (const dir of deepestFirst) {
      const entries = this.dirs.get(dir);
      if (!entries) continue; // pruned: it became empty
      const oid = await this.store.writeTree([...entries.values()]);
      if (dir === '') root = oid;
      else {
        const { dir: parent, name } = split(dir);
        this.dirs.get(parent)?.set(name, { mode: TREE_MODE, path: name, oid, type: 'tree' });
      }
    }
    return root;
  }

  /**
   * Entries of directory `dir`, loading it and its parents on first use. Walking through a committed
   * symlink or submodule is refused: the patch would write outside what the tree shows.
   */
  private async directory(dir: string, forPath: string, create: boolean): Promise<Map<string, TreeEntry> | undefined> {
    const loaded = this.dirs.get(dir);
    if (loaded) return loaded;
    if (dir === '') return this.load('', this.rootTree);
    const { dir: parentDir, name } = split(dir);
    const parent = await this.directory(parentDir, forPath, create);
    const entry = parent?.get(name);
    if (!entry) {
      if (!parent || !create) return undefined;
      refuseTwin(parent, name, forPath);
      const fresh = new Map<string, TreeEntry>();
      this.dirs.set(dir, fresh);
      return fresh;
    }
    if (entry.mode === SYMLINK_MODE) throw unsafePatch(forPath, `walks through the committed symlink "${dir}"`);
    if (entry.type === 'commit') throw unsafePatch(forPath, `walks through the submodule "${dir}"`);
    if (entry.type !== 'tree') throw doesNotApply(forPath, `"${dir}" is a file, not a directory`);
    return this.load(dir, entry.oid);
  }

  private async load(dir: string, oid: string): Promise<Map<string, TreeEntry>> {
    const entries = new Map((await this.store.readTree(oid)).map((e) => [e.path, e] as const));
    this.dirs.set(dir, entries);
    return entries;
  }

  private markDirty(dir: string): void {
    for (let d: string | undefined = dir; d !== undefined; d = d === '' ? undefined : split(d).dir) this.dirty.add(d);
  }

  /** git stores no empty trees: drop a directory that lost its last entry, and its empty parents. */
  private pruneEmpty(dir: string): void {
    for (let d = dir; d !== '' && this.dirs.get(d)?.size === 0; d = split(d).dir) {
      this.dirs.delete(d);
      this.dirs.get(split(d).dir)?.delete(split(d).name);
    }
  }
}

/**
 * Applies operations the way `git apply` does: every operation reads the base tree, removals happen
 * before writes (so a file can become a directory), and a new file may not overwrite anything.
 * Returns the new root tree id.
 */
export async function applyOperations(
  store: ObjectStore,
  rootTree: string,
  operations: readonly FileOperation[],
): Promise<string> {
  const editor = new TreeEditor(store, rootTree);
  await editor.preload(
    touchedPaths(operations),
    operations.flatMap((op) =>
      readsContent(op) ? [op.kind === 'rename' || op.kind === 'copy' ? op.from : op.path] : [],
    ),
  );
  const writes: { path: string; file: { oid: string; mode: FileMode }; create: boolean }[] = [];
  const removals: string[] = [];
  /** Stores a file's new content once the rules for the files git reads let it through. */
  const storeContent = async (path: string, bytes: Uint8Array) => {
    checkWrittenContent(path, bytes);
    return store.writeBlob(bytes);
  };
  for (const op of operations) {
    if (op.kind === 'add') {
      const oid = await storeContent(op.path, encodePatchText(applyHunks(op.path, '', op.hunks)));
      writes.push({ path: op.path, file: { oid, mode: op.mode }, create: true });
      continue;
    }
    const source = op.kind === 'rename' || op.kind === 'copy' ? op.from : op.path;
    const base = await editor.readFile(source);
    if (op.kind === 'delete') {
      const rest =
        op.hunks.length === 0
          ? await store.readBlob(base.oid)
          : encodePatchText(await patched(store, op.path, base.oid, op.hunks));
      if (rest.length > 0) throw doesNotApply(op.path, 'the deletion does not remove the whole file');
      removals.push(op.path);
      continue;
    }
    let oid = base.oid;
    if (op.hunks.length > 0)
      oid = await storeContent(op.path, encodePatchText(await patched(store, op.path, base.oid, op.hunks)));
    // No hunks (pure rename or mode change): the blob is kept as is, but a file moved to a name git reads is checked too.
    else if (isCheckedContent(op.path)) checkWrittenContent(op.path, await store.readBlob(base.oid));
    writes.push({ path: op.path, file: { oid, mode: op.mode ?? base.mode }, create: op.kind !== 'modify' });
    if (op.kind === 'rename') removals.push(op.from);
  }
  for (const path of removals) await editor.removeFile(path);
  for (const { path, file, create } of writes) await editor.writeFile(path, file, create);
  return editor.write();
}

/**
 * Whether applying `op` reads its source file's content (as the loop above does): to patch it, to
 * check that a deletion removes all of it, or to check a file moved to a name git reads. A read
 * this misses still works, as one request more in a partial repository.
 */
function readsContent(op: FileOperation): boolean {
  return op.kind !== 'add' && (op.kind === 'delete' || op.hunks.length > 0 || isCheckedContent(op.path));
}

async function patched(store: ObjectStore, path: string, oid: string, hunks: readonly PatchHunk[]): Promise<string> {
  // Any encoding: the engine works on text that maps back to the file's exact bytes.
  return applyHunks(path, decodePatchBytes(await store.readBlob(oid)), hunks);
}
