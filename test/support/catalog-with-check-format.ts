/**
 * The job-type catalog with a throw-away command stage, `check_format`, declared as a fork would
 * (contract/job-types.ts `commandStage`). Tests mock contract/job-types with it because contract/
 * cannot grow a job type just for them; everything derived from the catalog is the real code.
 * Called from a jest.mock factory of that module, so it reads the real one with jest.requireActual.
 */
type Catalog = typeof import('../../contract/job-types');

export function catalogWithCheckFormat(defaultCommand: string): Catalog {
  const catalog = jest.requireActual<Catalog>('../../contract/job-types');
  const types = {
    ...catalog.JOB_TYPES,
    check_format: catalog.commandStage({
      summary: 'check the formatting at the pinned commit',
      command: { defaultCommand, subject: 'format check' },
      stage: {
        queue: 'check-format',
        timeoutSeconds: 30,
        memoryMb: 128,
        batchSize: 2,
        maxConcurrency: 3,
        maxReceiveCount: 6,
        oldestMessageAlarmSeconds: 600,
        bundleBudgetKiB: 120,
      },
    }),
  };
  return { ...catalog, JOB_TYPES: types, ...catalog.deriveCatalog(types) } as Catalog;
}
