/**
 * Claim-checked diffs read back from S3 (fauxqs' S3 locally): what the sequencer needs, and all
 * it loads (the writer, diff-store.ts, brings the multipart upload library). The object must have
 * the size and sha256 its reference names, else the job is refused.
 */
import { createHash } from 'node:crypto';
import { GetObjectCommand, NoSuchKey, type S3Client } from '@aws-sdk/client-s3';
import type { DiffRef } from '../../contract/job-types';
import { PermanentJobError } from '../core/errors';
import type { DiffStore } from '../core/ports';

export class S3DiffReader implements Pick<DiffStore, 'get'> {
  constructor(
    protected readonly client: S3Client,
    protected readonly bucket: string,
  ) {}

  async get(ref: DiffRef): Promise<Uint8Array> {
    // The function may only read its own bucket; a reference elsewhere is bad input, not a retry.
    if (ref.bucket !== this.bucket)
      throw new PermanentJobError('INVALID_JOB', `diffRef bucket ${ref.bucket} is not the diff bucket`);
    const bytes = await this.read(ref);
    if (bytes.length !== ref.bytes || sha256Hex(bytes) !== ref.sha256) {
      throw new PermanentJobError(
        'INVALID_JOB',
        `diffRef s3://${ref.bucket}/${ref.key} does not match its size or sha256`,
      );
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
        throw new PermanentJobError('INVALID_JOB', `diffRef s3://${ref.bucket}/${ref.key} does not exist`, {
          cause: error,
        });
      }
      throw error;
    }
  }
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}
