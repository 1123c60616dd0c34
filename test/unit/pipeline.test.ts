import { InvalidJobError, PermanentJobError, TransientJobError } from '../../src/core/errors';
import { backoffSeconds, classifyFailure, receiveCount } from '../../src/core/pipeline';
import { sqsRecordFactory } from '../support/sqs-records';

describe('classifyFailure', () => {
  it('keeps a permanent error permanent, on any receive', () => {
    const error = new InvalidJobError('bad');
    expect(classifyFailure(error, 1, 5)).toBe(error);
  });

  it('retries a TransientJobError before the last allowed receive', () => {
    const transient = new TransientJobError('throttled');
    expect(classifyFailure(transient, 4, 5)).toBe(transient);
  });

  // Shapes as the AWS SDK, Node and fetch make them (the core judges by shape: it imports no SDK).
  const awsError = (name: string, httpStatusCode: number, extra: Record<string, unknown> = {}) =>
    Object.assign(new Error(`${name} from the service`), {
      name,
      $fault: httpStatusCode >= 500 ? 'server' : 'client',
      $metadata: { httpStatusCode },
      ...extra,
    });
  const systemError = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:9`), { code });

  it.each<[string, unknown]>([
    ['a reset connection', systemError('ECONNRESET')],
    ['a host that does not resolve', systemError('EAI_AGAIN')],
    [
      'fetch failing on a reset connection (TypeError with the system error as cause)',
      new TypeError('fetch failed', { cause: systemError('ECONNRESET') }),
    ],
    [
      'DynamoDB throttling',
      awsError('ProvisionedThroughputExceededException', 400, { $retryable: { throttling: true } }),
    ],
    ['SQS throttling by name', awsError('ThrottlingException', 400)],
    ['an HTTP 429', awsError('TooManyRequests', 429)],
    ['a 5xx from a service', awsError('InternalServerError', 500)],
    ['a 503', awsError('ServiceUnavailable', 503)],
    ['an SDK request timeout', Object.assign(new Error('socket timed out'), { name: 'TimeoutError' })],
    ['a full scratch disk', systemError('ENOSPC')],
  ])('retries %s (transient by cause) before the last allowed receive', (_what, error) => {
    const failure = classifyFailure(error, 1, 5);
    expect(failure).toBeInstanceOf(TransientJobError);
    expect(failure.cause).toBe(error);
  });

  it.each<[string, unknown, RegExp]>([
    [
      'a TypeError from input the rules let through',
      new TypeError("Cannot read properties of undefined (reading 'split')"),
      /^TypeError: Cannot read properties of undefined/,
    ],
    ['a RangeError', new RangeError('Invalid array length'), /^RangeError: Invalid array length/],
    [
      'an unsafe path from the git library',
      Object.assign(new Error('The filepath "a\\b" contains unsafe character sequences'), {
        name: 'UnsafeFilepathError',
        code: 'UnsafeFilepathError',
      }),
      /^UnsafeFilepathError: /,
    ],
    ['an AWS 4xx (validation)', awsError('ValidationException', 400), /^ValidationException: /],
    ['access denied', awsError('AccessDeniedException', 403), /^AccessDeniedException: /],
    ['an error of no known cause', new Error('packObjects returned no packfile'), /^packObjects returned no packfile/],
    ['a thrown string', 'boom', /^boom/],
  ])('fails %s at once as UNEXPECTED_ERROR, on the first receive, keeping the cause', (_what, error, says) => {
    const failure = classifyFailure(error, 1, 5);
    expect(failure).toBeInstanceOf(PermanentJobError);
    expect(failure).toMatchObject({ reason: 'UNEXPECTED_ERROR', cause: error });
    expect(failure.message).toMatch(says);
    expect(failure.message).toContain('retrying cannot cure it');
  });

  it('follows a cyclic cause chain to its bound without hanging', () => {
    const a: Error & { cause?: unknown } = new Error('a');
    const b = new Error('b', { cause: a });
    a.cause = b;
    expect(classifyFailure(a, 1, 5)).toMatchObject({ reason: 'UNEXPECTED_ERROR' });
  });

  it('turns a transient error on the last allowed receive into RETRIES_EXHAUSTED, keeping the cause', () => {
    const cause = new TransientJobError('throttled');
    for (const receives of [5, 6]) {
      const failure = classifyFailure(cause, receives, 5);
      expect(failure).toBeInstanceOf(PermanentJobError);
      expect((failure as PermanentJobError).reason).toBe('RETRIES_EXHAUSTED');
      expect(failure.message).toContain('throttled');
      expect(failure.cause).toBe(cause);
    }
  });
});

describe('backoffSeconds', () => {
  const settings = { baseSeconds: 10, capSeconds: 900 };

  it('doubles per receive from the base', () => {
    expect([1, 2, 3, 4].map((n) => backoffSeconds(n, settings))).toEqual([10, 20, 40, 80]);
  });

  it('is capped, even for absurd receive counts', () => {
    expect(backoffSeconds(8, settings)).toBe(900);
    expect(backoffSeconds(10_000, settings)).toBe(900);
  });
});

describe('receiveCount', () => {
  it('reads ApproximateReceiveCount and falls back to 1 when it is missing or malformed', () => {
    expect(receiveCount(sqsRecordFactory('x', { receiveCount: 3 }))).toBe(3);
    const broken = sqsRecordFactory('x');
    broken.attributes.ApproximateReceiveCount = 'n/a';
    expect(receiveCount(broken)).toBe(1);
  });
});
