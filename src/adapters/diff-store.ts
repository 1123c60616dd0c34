/**
 * Claim-checked diffs in S3 (fauxqs' S3 locally). Objects are content-addressed under the caller's
 * key, so a producer that retries a send writes the same object, and the consumer refuses any
 * object whose size or sha256 differs from the reference it was given.
 */
import { createHash } from 'node:crypto';
import { GetObjectCommand, NoSuchKey, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { DiffRef } from '../../contract/job-types';
import { PermanentJobError } from '../core/errors';
import type { DiffStore } from '../core/ports';

export class S3DiffStore implements DiffStore {
  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
  ) {}

  /** Stores `body` at `<key>/<sha256>.diff`; `key` namespaces it (e.g. `<workspaceId>/<jobId>`). */
  async put(key: string, body: Uint8Array): Promise<DiffRef> {
    const bytes = Buffer.from(body);
    const sha256 = sha256Hex(bytes);
    const objectKey = `${key}/${sha256}.diff`;
    await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: objectKey, Body: bytes, ContentType: 'text/x-diff' }));
    return { bucket: this.bucket, key: objectKey, sha256, bytes: bytes.length };
  }

  async get(ref: DiffRef): Promise<Uint8Array> {
    // The function may only read its own bucket; a reference elsewhere is bad input, not a retry.
    if (ref.bucket !== this.bucket) throw new PermanentJobError('INVALID_JOB', `diffRef bucket ${ref.bucket} is not the diff bucket`);
    const bytes = await this.read(ref);
    if (bytes.length !== ref.bytes || sha256Hex(bytes) !== ref.sha256) {
      throw new PermanentJobError('INVALID_JOB', `diffRef s3://${ref.bucket}/${ref.key} does not match its size or sha256`);
    }
    return bytes;
  }

  private async read(ref: DiffRef): Promise<Buffer> {
    try {
      const object = await this.client.send(new GetObjectCommand({ Bucket: ref.bucket, Key: ref.key }));
      if (!object.Body) throw new PermanentJobError('INVALID_JOB', `diffRef s3://${ref.bucket}/${ref.key} has no body`);
      return Buffer.from(await object.Body.transformToByteArray());
    } catch (error) {
      if (error instanceof NoSuchKey) {
        throw new PermanentJobError('INVALID_JOB', `diffRef s3://${ref.bucket}/${ref.key} does not exist`, { cause: error });
      }
      throw error;
    }
  }
}

function sha256Hex(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}
