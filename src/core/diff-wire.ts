/**
 * How an apply_patch diff travels, and back to its bytes. A diff is bytes: a file in Latin-1 or
 * with a stray invalid byte makes a diff that is not UTF-8, and JSON can only carry text. So the
 * payload holds exactly one of:
 * - `diff`: the diff as text, when its bytes are UTF-8 (readable in a DLQ or the CLI);
 * - `diffBase64`: its exact bytes, when they are not;
 * - `diffRef`: an S3 object with its bytes, when it is over the inline limit (claim-check).
 * The producer picks the form (inlineDiff); every consumer gets the same bytes back
 * (inlineDiffBytes, or the diff store for a diffRef). One byte sequence has one inline form, so
 * the digest does not depend on which one a producer sent (canonicalInlineDiff).
 */
import type { ApplyPatchPayload } from '../../contract/job-types';

export type InlineDiff = { readonly diff: string } | { readonly diffBase64: string };

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function utf8Text(bytes: Uint8Array): string | undefined {
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** The inline form of a diff: text as `diff`, bytes as `diff` when they are UTF-8, else `diffBase64`. */
export function inlineDiff(diff: string | Uint8Array): InlineDiff {
  if (typeof diff === 'string') return { diff };
  const text = utf8Text(diff);
  return text !== undefined ? { diff: text } : { diffBase64: Buffer.from(diff).toString('base64') };
}

/** The bytes of an inline diff; undefined when the payload carries a diffRef instead. */
export function inlineDiffBytes(payload: Pick<ApplyPatchPayload, 'diff' | 'diffBase64'>): Uint8Array | undefined {
  if (payload.diff !== undefined) return new TextEncoder().encode(payload.diff);
  if (payload.diffBase64 !== undefined) return Buffer.from(payload.diffBase64, 'base64');
  return undefined;
}

/** The payload with its inline diff in its one canonical form: base64 of UTF-8 text becomes `diff`. */
export function canonicalInlineDiff<P extends Pick<ApplyPatchPayload, 'diff' | 'diffBase64'>>(payload: P): P {
  if (payload.diffBase64 === undefined) return payload;
  const { diffBase64, ...rest } = payload;
  return { ...rest, ...inlineDiff(Buffer.from(diffBase64, 'base64')) } as P;
}
