/**
 * What isomorphic-git uses of sha.js (`new Hash().update(bytes).digest(encoding)`, SHA-1 only), over
 * Node's own crypto. Bundles take it in place of `sha.js/sha1.js` (ESM_ALIASES in
 * lib/constructs/worker.ts): sha.js pulls in a chain of polyfill packages (get-intrinsic,
 * to-buffer, call-bind, ...) worth over 20 KiB for a hash the runtime computes natively.
 */
import { createHash, type BinaryToTextEncoding, type Hash } from 'node:crypto';

export default class Sha1 {
  private readonly hash: Hash = createHash('sha1');

  update(data: string | Uint8Array, encoding?: BufferEncoding): this {
    if (typeof data === 'string') this.hash.update(data, encoding ?? 'utf8');
    else this.hash.update(data);
    return this;
  }

  digest(): Buffer;
  digest(encoding: BinaryToTextEncoding): string;
  digest(encoding?: BinaryToTextEncoding): Buffer | string {
    return encoding === undefined ? this.hash.digest() : this.hash.digest(encoding);
  }
}
