/**
 * Claim-checked diffs in S3 (fauxqs' S3 locally), written by producers. Objects are
 * content-addressed under the caller's key, so a producer that retries a send writes the same
 * object, and the consumer (diff-reader.ts) refuses any object whose size or sha256 differs from
 * the reference it was given.
 *
 * A diff may be up to MAX_DIFF_BYTES (20 MiB). It is written with a multipart upload in parts of
 * PART_BYTES (one PutObject when it fits in one part), through the SDK's own `Upload`
 * (@aws-sdk/lib-storage) rather than hand-written part bookkeeping: the local S3 emulator refuses
 * a request body over about 11 MiB, and on AWS parts are retried one by one. An upload that fails
 * is aborted (the bucket's lifecycle rule removes any part an abort missed after a day).
 */
import { type S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { DiffRef } from '../../contract/job-types';
import type { DiffStore } from '../core/ports';
import { S3DiffReader, sha256Hex } from './diff-reader';

/** S3's smallest part (5 MiB): a diff at the 20 MiB limit goes in four. */
const PART_BYTES = 5 * 1024 * 1024;

export class S3DiffStore extends S3DiffReader implements DiffStore {
  constructor(client: S3Client, bucket: string) {
    super(client, bucket);
  }

  /** Stores `body` at `<key>/<sha256>.diff`; `key` namespaces it (e.g. `<workspaceId>/<jobId>`). */
  async put(key: string, body: Uint8Array): Promise<DiffRef> {
    const bytes = Buffer.from(body);
    const sha256 = sha256Hex(bytes);
    const objectKey = `${key}/${sha256}.diff`;
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: objectKey, Body: bytes, ContentType: 'text/x-diff' },
      partSize: PART_BYTES,
      leavePartsOnError: false,
    });
    await upload.done();
    return { bucket: this.bucket, key: objectKey, sha256, bytes: bytes.length };
  }
}
