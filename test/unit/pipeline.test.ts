import { InvalidJobError, PermanentJobError, TransientJobError } from '../../src/core/errors';
import { backoffSeconds, classifyFailure, receiveCount } from '../../src/core/pipeline';
import { sqsRecordFactory } from '../support/sqs-records';

describe('classifyFailure', () => {
  it('keeps a permanent error permanent, on any receive', () => {
    const error = new InvalidJobError('bad');
    expect(classifyFailure(error, 1, 5)).toBe(error);
  });

  it('retries transient and unknown errors before the last allowed receive', () => {
    const transient = new TransientJobError('throttled');
    expect(classifyFailure(transient, 4, 5)).toBe(transient);
    const unknown = classifyFailure(new Error('socket hang up'), 1, 5);
    expect(unknown).toBeInstanceOf(TransientJobError);
    expect(unknown).not.toBeInstanceOf(PermanentJobError);
    expect(unknown.message).toBe('socket hang up');
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
