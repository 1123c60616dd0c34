/**
 * The pipeline's error classes are recognised across copies of their module: the sequencer's git
 * engine ships as a file of its own beside the function's bundle, with its own copy of
 * src/core/errors.ts, and the pipeline classifies what it throws by `instanceof`.
 */
import * as errors from '../../src/core/errors';
import { classifyFailure } from '../../src/core/pipeline';

/** A second copy of the module, as a separately bundled file has. */
function anotherCopy(): typeof errors {
  let copy: typeof errors | undefined;
  jest.isolateModules(() => {
    copy = require('../../src/core/errors') as typeof errors;
  });
  if (copy === undefined || copy.PermanentJobError === errors.PermanentJobError)
    throw new Error('jest served the same copy of src/core/errors.ts');
  return copy;
}

it('recognises each class of an error made by another copy of the module', () => {
  const other = anotherCopy();
  const permanent = new other.PermanentJobError('UNSAFE_PATCH', 'the patch leaves the workspace');
  expect(permanent).toBeInstanceOf(errors.PermanentJobError);
  expect(permanent).toBeInstanceOf(Error);
  expect(permanent).not.toBeInstanceOf(errors.TransientJobError);
  expect(permanent).not.toBeInstanceOf(errors.InvalidJobError);

  const invalid = new other.InvalidJobError('payload.diff: required');
  expect(invalid).toBeInstanceOf(errors.InvalidJobError);
  expect(invalid).toBeInstanceOf(errors.PermanentJobError);
  expect(invalid).not.toBeInstanceOf(errors.RefusedBeforeTurnError);

  const lost = new other.LeaseLostError('lease taken over');
  expect(lost).toBeInstanceOf(errors.LeaseLostError);
  expect(lost).toBeInstanceOf(errors.TransientJobError);
  expect(lost).not.toBeInstanceOf(errors.LeaseHeldError);
  expect(new other.ConfigurationError('X is not set')).toBeInstanceOf(errors.ConfigurationError);
});

it('classifies what another copy throws as the pipeline classifies its own', () => {
  const other = anotherCopy();
  // First of five receives: a permanent error fails now, a transient one is retried as it came.
  const failure = classifyFailure(new other.PermanentJobError('PATCH_DOES_NOT_APPLY', 'hunk 1 does not apply'), 1, 5);
  expect(failure).toMatchObject({ reason: 'PATCH_DOES_NOT_APPLY', message: 'hunk 1 does not apply' });
  const transient = new other.TransientJobError('remote 503');
  expect(classifyFailure(transient, 1, 5)).toBe(transient);
});

it('keeps plain prototype instanceof for a subclass that declares no kind of its own', () => {
  class LocalFailure extends errors.PermanentJobError {}
  const local = new LocalFailure('TEST_RUN_ERROR', 'the build broke');
  expect(local).toBeInstanceOf(LocalFailure);
  expect(local).toBeInstanceOf(errors.PermanentJobError);
  expect(new errors.PermanentJobError('TEST_RUN_ERROR', 'the build broke')).not.toBeInstanceOf(LocalFailure);
});

it('recognises nothing that is not one of its errors', () => {
  for (const value of [undefined, null, 'PermanentJobError', {}, new Error('plain')])
    expect(value).not.toBeInstanceOf(errors.PermanentJobError);
});
