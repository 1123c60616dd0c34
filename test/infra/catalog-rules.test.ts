/**
 * A wrong job-type declaration fails `cdk synth` naming the setting (lib/catalog-rules.ts), before
 * any resource is made.
 */
import { JOB_TYPES, commandStage, type JobTypeDeclaration } from '../../contract/job-types';
import { catalogProblems } from '../../lib/catalog-rules';
import { InvalidSettingsError } from '../../lib/constructs/settings-problems';
import { ROOT } from './helpers';

const stageSettings = {
  queue: 'check-format',
  timeoutSeconds: 30,
  memoryMb: 128,
  batchSize: 1,
  maxConcurrency: 2,
  maxReceiveCount: 5,
  oldestMessageAlarmSeconds: 600,
  bundleBudgetKiB: 120,
};
const checkFormat = commandStage({
  summary: 'check the formatting',
  command: { defaultCommand: 'npx prettier --check .', subject: 'format check' },
  stage: stageSettings,
});
const problemsWith = (extra: Record<string, JobTypeDeclaration>) => catalogProblems({ ...JOB_TYPES, ...extra }, ROOT);

describe('catalogProblems', () => {
  it('finds none in the shipped catalog, nor with a well-declared command stage added', () => {
    expect(catalogProblems(JOB_TYPES, ROOT)).toEqual([]);
    expect(problemsWith({ check_format: checkFormat })).toEqual([]);
  });

  it('names a queue two job types (or a platform worker) would share', () => {
    expect(
      problemsWith({ check_format: commandStage({ ...checkFormat, stage: { ...stageSettings, queue: 'run-tests' } }) }),
    ).toEqual(['JOB_TYPES.check_format.stage.queue: "run-tests" is already the queue of run_tests']);
    expect(
      problemsWith({
        check_format: commandStage({ ...checkFormat, stage: { ...stageSettings, queue: 'build-events' } }),
      }),
    ).toEqual(['JOB_TYPES.check_format.stage.queue: "build-events" is already the queue of the build-events consumer']);
    // Different names that would give the same CloudFormation output key.
    expect(
      problemsWith({
        check_format: commandStage({ ...checkFormat, stage: { ...stageSettings, queue: 'run-tests-' } }),
      }),
    ).toEqual([expect.stringMatching(/^JOB_TYPES\.check_format\.stage\.queue: "run-tests-"/)]);
  });

  it("names a stage's requirement that is not a command stage, itself, or an ordered type's", () => {
    expect(problemsWith({ open_pr: { ...JOB_TYPES.open_pr, requires: ['run_tests', 'run_lint'] } })).toEqual([]);
    expect(problemsWith({ open_pr: { ...JOB_TYPES.open_pr, requires: ['apply_patch', 'no_such_stage'] } })).toEqual([
      'JOB_TYPES.open_pr.requires: "apply_patch" is not a command stage of the catalog: a stage requires the verdicts of command stages',
      'JOB_TYPES.open_pr.requires: "no_such_stage" is not a command stage of the catalog: a stage requires the verdicts of command stages',
    ]);
    expect(problemsWith({ check_format: { ...checkFormat, requires: ['check_format'] } })).toEqual([
      'JOB_TYPES.check_format.requires: a stage cannot require itself',
    ]);
    expect(problemsWith({ apply_patch: { ...JOB_TYPES.apply_patch, requires: ['run_tests'] } })).toEqual([
      'JOB_TYPES.apply_patch.requires: only a stage can require verdicts: an ordered job type runs in the sequencer, before any stage at its commit',
    ]);
  });

  it('names a type that takes a worker name, or differs from another only in case', () => {
    expect(problemsWith({ build_events: checkFormat })).toEqual([
      'JOB_TYPES.build_events: "build_events" is the name of a platform worker; choose another',
    ]);
    expect(problemsWith({ Run_Tests: { ...checkFormat, stage: { ...checkFormat.stage, queue: 'other' } } })).toEqual([
      expect.stringMatching(/^JOB_TYPES\.Run_Tests: the type name must match/),
      "JOB_TYPES.Run_Tests: its queue URL variable STAGE_QUEUE_URL_RUN_TESTS is already run_tests's: choose a name that differs in more than case",
    ]);
  });

  it('names an ordered type without the mutation processor, or with a stage', () => {
    const ordered: JobTypeDeclaration = {
      lane: 'ordered',
      payload: JOB_TYPES.apply_patch.payload,
      summary: 'format the code',
    };
    expect(problemsWith({ format_code: ordered })).toEqual([
      'JOB_TYPES.format_code.processor: an ordered job type needs the mutation processor the sequencer runs (src/core/jobs/<type>.ts)',
    ]);
    expect(
      problemsWith({
        format_code: { ...ordered, processor: 'src/core/jobs/format-code.ts', stage: checkFormat.stage },
      }),
    ).toEqual([
      'JOB_TYPES.format_code.processor: src/core/jobs/format-code.ts does not exist',
      'JOB_TYPES.format_code.stage: an ordered job type runs inside the sequencer: it has no stage queue or function',
    ]);
  });

  it('names a stage without its settings, processor or handler', () => {
    const stage: JobTypeDeclaration = {
      lane: 'staged',
      payload: JOB_TYPES.open_pr.payload,
      summary: 'label the pull request',
    };
    expect(problemsWith({ label_pr: stage })).toEqual([
      'JOB_TYPES.label_pr.processor: a stage needs a processor, or a `commandStage` declaration to run a command',
      'JOB_TYPES.label_pr.stage: a staged job type needs its stage settings (queue, function, alarms)',
    ]);
    expect(
      problemsWith({
        label_pr: {
          ...stage,
          processor: 'src/core/jobs/open-pr.ts',
          stage: { ...JOB_TYPES.open_pr.stage, queue: 'label-pr', handlerEntry: 'src/handlers/label-pr.ts' },
        },
      }),
    ).toEqual(['JOB_TYPES.label_pr.stage.handlerEntry: src/handlers/label-pr.ts does not exist']);
  });

  it('names a stage timeout its function and queue cannot carry, and says a build is not bound by it', () => {
    expect(
      problemsWith({
        check_format: commandStage({ ...checkFormat, stage: { ...stageSettings, timeoutSeconds: 3600 } }),
      }),
    ).toEqual([
      expect.stringMatching(
        /^JOB_TYPES\.check_format\.stage\.timeoutSeconds = 3600: must be 1\.\.900 seconds \(the Lambda maximum\)\. A command stage's build is not bound by it/,
      ),
    ]);
  });

  it('names an empty default command or subject', () => {
    expect(
      problemsWith({ check_format: commandStage({ ...checkFormat, command: { defaultCommand: ' ', subject: '' } }) }),
    ).toEqual([
      'JOB_TYPES.check_format.command.defaultCommand: must be a shell command',
      'JOB_TYPES.check_format.command.subject: must name what the command checks ("tests", "lint")',
    ]);
  });

  it('refuses a command limit that is not a whole number of at least 1', () => {
    expect(
      problemsWith({
        check_format: commandStage({
          ...checkFormat,
          command: { ...checkFormat.command, limits: { memoryMiB: 0, processes: 2.5, cpuSeconds: 60 } },
        }),
      }),
    ).toEqual([
      expect.stringMatching(
        /^JOB_TYPES\.check_format\.command\.limits\.memoryMiB = 0: must be a whole number of at least 1/,
      ),
      expect.stringMatching(/^JOB_TYPES\.check_format\.command\.limits\.processes = 2\.5: must be a whole number/),
    ]);
  });
});

it('a wrong declaration fails the synth, naming every wrong setting, before any resource is made', () => {
  jest.isolateModules(() => {
    jest.doMock('../../contract/job-types', () => {
      const actual = jest.requireActual<typeof import('../../contract/job-types')>('../../contract/job-types');
      const types = {
        ...actual.JOB_TYPES,
        check_format: actual.commandStage({ ...checkFormat, stage: { ...stageSettings, queue: 'open-pr' } }),
        format_code: {
          lane: 'ordered' as const,
          payload: actual.JOB_TYPES.apply_patch.payload,
          summary: 'format the code',
        },
      };
      return { ...actual, JOB_TYPES: types, ...actual.deriveCatalog(types) };
    });
    const { synth } = jest.requireActual<typeof import('./helpers')>('./helpers');
    const { InvalidSettingsError: Thrown } = jest.requireActual<
      typeof import('../../lib/constructs/settings-problems')
    >('../../lib/constructs/settings-problems');
    let thrown: unknown;
    try {
      synth();
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(Thrown);
    expect((thrown as InvalidSettingsError).message).toBe(
      [
        'the job-type catalog (contract/job-types.ts) has invalid settings:',
        '  - JOB_TYPES.check_format.stage.queue: "open-pr" is already the queue of open_pr',
        '  - JOB_TYPES.format_code.processor: an ordered job type needs the mutation processor the sequencer runs (src/core/jobs/<type>.ts)',
      ].join('\n'),
    );
  });
});
