import { createHash } from 'node:crypto';
import {
  canonicalJson,
  deduplicationId,
  deliveredGroupId,
  jobAttributes,
  jobDigest,
  messageGroupId,
  parseEnvelope,
  parseStageMessage,
  tenantGroupId,
  type JobEnvelope,
} from '../../src/core/envelope';
import { InvalidJobError } from '../../src/core/errors';
import { sqsRecordFactory } from '../support/sqs-records';

const patch = {
  jobId: 'job-1',
  workspaceId: 'ws-1',
  tenantId: 'acme',
  type: 'apply_patch',
  createdAt: '2026-11-29T10:00:00.000Z',
  payload: {
    repo: { url: 'https://git.example.com/acme/app.git', branch: 'agent/ws-1' },
    diff: 'diff --git a/x b/x\n',
    message: 'Fix it',
  },
} as const;

function invalid(input: unknown): string {
  try {
    parseEnvelope(input);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidJobError);
    return (error as InvalidJobError).message;
  }
  throw new Error('expected the envelope to be rejected');
}

describe('parseEnvelope', () => {
  it('accepts a valid job as an object or as JSON text', () => {
    expect(parseEnvelope(patch)).toEqual(patch);
    expect(parseEnvelope(JSON.stringify(patch))).toEqual(patch);
  });

  it('names every invalid field of the envelope at once', () => {
    const message = invalid({ ...patch, jobId: '../etc', workspaceId: '', tenantId: 'a b', createdAt: 'yesterday' });
    for (const field of ['jobId', 'workspaceId', 'tenantId', 'createdAt']) expect(message).toContain(`${field}:`);
  });

  it.each([
    ['an unknown type', { ...patch, type: 'deploy' }, 'type'],
    ['an unknown envelope field', { ...patch, extra: 1 }, 'extra'],
    ['a job id longer than 64 characters', { ...patch, jobId: 'j'.repeat(65) }, 'jobId'],
    ['a createdAt with an offset', { ...patch, createdAt: '2026-11-29T10:00:00+02:00' }, 'createdAt'],
  ])('rejects %s', (_label, input, field) => {
    expect(invalid(input)).toContain(field);
  });

  it('validates the payload against its job type and prefixes the path with payload', () => {
    const message = invalid({
      ...patch,
      payload: { ...patch.payload, repo: { url: 'file:///etc', branch: 'a..b' }, message: '' },
    });
    expect(message).toMatch(/^invalid apply_patch payload: /);
    expect(message).toContain('payload.repo.url');
    expect(message).toContain('payload.repo.branch');
    expect(message).toContain('payload.message');
  });

  it('refuses credentials in the repository URL (they would land in the queue, the DLQ and the ledger)', () => {
    const message = invalid({
      ...patch,
      payload: {
        ...patch.payload,
        repo: { ...patch.payload.repo, url: 'https://bot:ghp_secret@git.example.com/acme/app.git' },
      },
    });
    expect(message).toContain('payload.repo.url');
    expect(message).toContain('must not carry credentials');
    expect(message).not.toContain('ghp_secret');
  });

  it.each([
    ['an upper-case scheme', 'HTTP://bot:ghp_secret@git.example.com/acme/app.git'],
    ['a mixed-case scheme', 'hTTpS://bot:ghp_secret@git.example.com/acme/app.git'],
    ['a user name alone', 'https://ghp_secret@git.example.com/acme/app.git'],
    ['an empty password', 'https://ghp_secret:@git.example.com/acme/app.git'],
  ])('refuses credentials in the repository URL whatever the spelling: %s', (_label, url) => {
    const message = invalid({ ...patch, payload: { ...patch.payload, repo: { ...patch.payload.repo, url } } });
    expect(message).toContain('payload.repo.url: must not carry credentials');
    expect(message).not.toContain('ghp_secret');
  });

  it.each([
    ['file://', 'file:///srv/git/app.git', 'must be an http(s) URL, not file:'],
    ['ssh://', 'ssh://git@git.example.com/acme/app.git', 'must be an http(s) URL, not ssh:'],
    [
      'a query (a token in disguise)',
      'https://git.example.com/acme/app.git?access_token=x',
      'must not have a query or a fragment',
    ],
    ['no URL at all', 'git.example.com:acme/app.git', 'must be an http(s) URL'],
  ])('refuses a repository URL with %s', (_label, url, problem) => {
    expect(invalid({ ...patch, payload: { ...patch.payload, repo: { ...patch.payload.repo, url } } })).toContain(
      `payload.repo.url: ${problem}`,
    );
  });

  it('carries the repository URL in the form it is dialled in (scheme and host lower-cased, default port dropped)', () => {
    const job = parseEnvelope({
      ...patch,
      payload: { ...patch.payload, repo: { ...patch.payload.repo, url: 'HTTPS://Git.Example.COM:443/acme/app.git' } },
    });
    expect(job.type === 'apply_patch' && job.payload.repo.url).toBe('https://git.example.com/acme/app.git');
  });

  it('requires exactly one of diff, diffBase64 and diffRef', () => {
    const { diff: _diff, ...withoutDiff } = patch.payload;
    expect(invalid({ ...patch, payload: withoutDiff })).toContain('exactly one of diff, diffBase64 or diffRef');
    const diffRef = { bucket: 'diffs', key: 'ws-1/job-1.diff', sha256: 'a'.repeat(64), bytes: 10 };
    expect(invalid({ ...patch, payload: { ...patch.payload, diffRef } })).toContain(
      'exactly one of diff, diffBase64 or diffRef',
    );
    expect(invalid({ ...patch, payload: { ...patch.payload, diffBase64: 'eA==' } })).toContain(
      'exactly one of diff, diffBase64 or diffRef',
    );
    expect(parseEnvelope({ ...patch, payload: { ...withoutDiff, diffRef } }).payload).toMatchObject({ diffRef });
    expect(parseEnvelope({ ...patch, payload: { ...withoutDiff, diffBase64: 'eA==' } }).payload).toMatchObject({
      diffBase64: 'eA==',
    });
  });

  it("accepts a run_tests timeout up to CodeBuild's quota (8 hours): no function waits for the build", () => {
    const tests = { ...patch, type: 'run_tests', payload: { timeoutSeconds: 2 * 3600 } };
    expect(parseEnvelope(tests).payload).toEqual({ timeoutSeconds: 7200 });
    expect(parseEnvelope({ ...tests, payload: { timeoutSeconds: 480 * 60 } }).payload).toEqual({
      timeoutSeconds: 28_800,
    });
    expect(invalid({ ...tests, payload: { timeoutSeconds: 480 * 60 + 1 } })).toContain('payload.timeoutSeconds');
  });

  it('says when the body is not JSON', () => {
    expect(invalid('{not json')).toMatch(/body is not JSON/);
  });
});

describe('parseStageMessage', () => {
  const tests = { ...patch, type: 'run_tests', payload: {} };
  const pin = { sha: 'b'.repeat(40), repoUrl: 'https://git.example.com/acme/app.git', branch: 'agent/ws-1' };

  it('accepts an envelope with its pin', () => {
    expect(parseStageMessage(JSON.stringify({ ...tests, pin }))).toEqual({ ...tests, pin });
  });

  it('rejects a message without a valid pin', () => {
    expect(() => parseStageMessage({ ...tests })).toThrow(/pin: is required/);
    expect(() => parseStageMessage({ ...tests, pin: { ...pin, sha: 'HEAD' } })).toThrow(
      /pin\.sha: must be a 40-character/,
    );
    expect(() => parseStageMessage({ ...tests, pin: { ...pin, repoUrl: 'x', branch: '' } })).toThrow(
      /pin\.repoUrl: must be an http\(s\) URL; pin\.branch: must not be empty/,
    );
  });

  it.each([
    ['a file:// URL', 'file:///srv/agent-jobs/repos/app.git', 'must be an http(s) URL, not file:'],
    ['credentials', 'HTTPS://bot:ghp_secret@git.example.com/acme/app.git', 'must not carry credentials'],
  ])('holds the pin to the same URL rules as repo.url: %s', (_label, repoUrl, problem) => {
    expect(() => parseStageMessage({ ...tests, pin: { ...pin, repoUrl } })).toThrow(`pin.repoUrl: ${problem}`);
  });
});

describe('FIFO ids and attributes', () => {
  it('groups by workspace', () => {
    expect(messageGroupId('ws-1')).toBe('ws#ws-1');
  });

  it('derives the deduplication id as sha256("<jobId>:<type>") in hex', () => {
    expect(deduplicationId('job-1', 'apply_patch')).toBe(
      createHash('sha256').update('job-1:apply_patch').digest('hex'),
    );
    expect(deduplicationId('job-1', 'apply_patch')).toMatch(/^[0-9a-f]{64}$/);
    expect(deduplicationId('job-1', 'run_tests')).not.toBe(deduplicationId('job-1', 'apply_patch'));
  });

  it('carries the triage ids as message attributes', () => {
    expect(jobAttributes(parseEnvelope(patch))).toEqual({
      jobId: 'job-1',
      workspaceId: 'ws-1',
      tenantId: 'acme',
      type: 'apply_patch',
    });
  });
});

describe('fair-queue groups (stage queues)', () => {
  it('groups a stage message by its tenant', () => {
    expect(tenantGroupId('acme')).toBe('acme');
  });

  it("keeps a delivered record's own group, else takes its tenant, else none", () => {
    expect(
      deliveredGroupId(sqsRecordFactory('{}', { messageGroupId: 'ws#ws-1', attributes: { tenantId: 'acme' } })),
    ).toBe('ws#ws-1');
    expect(deliveredGroupId(sqsRecordFactory('{}', { attributes: { tenantId: 'acme' } }))).toBe(tenantGroupId('acme'));
    expect(deliveredGroupId(sqsRecordFactory('{}'))).toBeUndefined();
  });
});

describe('jobDigest', () => {
  const job = parseEnvelope(patch) as JobEnvelope<'apply_patch'>;

  it('does not depend on key order or on createdAt (a producer retry re-stamps it)', () => {
    const reordered = JSON.parse(
      JSON.stringify({
        payload: {
          message: 'Fix it',
          diff: job.payload.diff,
          repo: { branch: 'agent/ws-1', url: job.payload.repo.url },
        },
      }),
    );
    expect(jobDigest({ ...job, ...reordered, createdAt: '2030-01-01T00:00:00Z' })).toBe(jobDigest(job));
  });

  it('changes with the payload, the workspace or the tenant', () => {
    const digest = jobDigest(job);
    expect(jobDigest({ ...job, payload: { ...job.payload, message: 'Other' } })).not.toBe(digest);
    expect(jobDigest({ ...job, workspaceId: 'ws-2' })).not.toBe(digest);
    expect(jobDigest({ ...job, tenantId: 'other' })).not.toBe(digest);
  });

  it('canonical JSON sorts keys at every depth and drops undefined', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { f: 1, e: 0 }], c: undefined } })).toBe(
      '{"a":{"d":[2,{"e":0,"f":1}]},"b":1}',
    );
  });
});
