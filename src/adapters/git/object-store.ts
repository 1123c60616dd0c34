/** The few object-database operations the tree editor needs, over isomorphic-git's loose objects. */
import * as fs from 'node:fs';
import * as git from 'isomorphic-git';

export type EntryType = 'blob' | 'tree' | 'commit';

export interface TreeEntry {
  readonly mode: string;
  readonly path: string;
  readonly oid: string;
  readonly type: EntryType;
}

export interface ObjectStore {
  readTree(oid: string): Promise<TreeEntry[]>;
  /** Writes a tree; entries in any order (git's order is applied on write). */
  writeTree(entries: readonly TreeEntry[]): Promise<string>;
  readBlob(oid: string): Promise<Uint8Array>;
  writeBlob(bytes: Uint8Array): Promise<string>;
}

/** Objects of the bare repository at `gitdir`; `cache` is isomorphic-git's pack-index cache. */
export function isomorphicGitStore(gitdir: string, cache: object = {}): ObjectStore {
  return {
    async readTree(oid) {
      return (await git.readTree({ fs, gitdir, oid, cache })).tree;
    },
    writeTree: (entries) => git.writeTree({ fs, gitdir, tree: [...entries] }),
    async readBlob(oid) {
      return (await git.readBlob({ fs, gitdir, oid, cache })).blob;
    },
    writeBlob: (blob) => git.writeBlob({ fs, gitdir, blob }),
  };
}

/** `store`, recording the id of every object written through it. */
export function recordingWrites(store: ObjectStore): ObjectStore & { readonly written: ReadonlySet<string> } {
  const written = new Set<string>();
  const record = (oid: string) => (written.add(oid), oid);
  return {
    ...store,
    written,
    writeTree: async (entries) => record(await store.writeTree(entries)),
    writeBlob: async (bytes) => record(await store.writeBlob(bytes)),
  };
}
