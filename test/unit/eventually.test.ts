import { eventually, EventuallyTimeoutError } from '../support/eventually';

describe('eventually', () => {
  it('resolves with the first value the condition accepts', async () => {
    let calls = 0;
    await expect(
      eventually(
        () => ++calls,
        (n) => n === 3,
        { what: 'three calls', intervalMs: 1 },
      ),
    ).resolves.toBe(3);
  });

  it('treats a probe that throws as not yet', async () => {
    let calls = 0;
    const probe = () => {
      if (++calls < 3) throw new Error('not written yet');
      return 'written';
    };
    await expect(eventually(probe, (v) => v === 'written', { what: 'the record', intervalMs: 1 })).resolves.toBe(
      'written',
    );
  });

  it('fails at the deadline naming what it waited for and the last state', async () => {
    const waiting = eventually(
      () => ({ status: 'IN_FLIGHT', attempt: 2 }),
      (r) => r.status === 'SUCCEEDED',
      { what: 'job-1 to succeed', timeoutMs: 20, intervalMs: 5 },
    );
    await expect(waiting).rejects.toThrow(EventuallyTimeoutError);
    await expect(waiting).rejects.toThrow(
      "timed out after 20 ms waiting for job-1 to succeed; last state: { status: 'IN_FLIGHT', attempt: 2 }",
    );
  });

  it('reports the last error when the probe never succeeded', async () => {
    const probe = () => {
      throw new Error('job job-9 is not in the ledger');
    };
    await expect(eventually(probe, () => true, { what: 'job-9', timeoutMs: 10, intervalMs: 5 })).rejects.toThrow(
      'last state: probe threw Error: job job-9 is not in the ledger',
    );
  });
});
