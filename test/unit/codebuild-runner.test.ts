import {
  BatchGetBuildsCommand,
  CodeBuildClient,
  InvalidInputException,
  ListBuildsForProjectCommand,
  ResourceNotFoundException,
  StartBuildCommand,
  StopBuildCommand,
  type Build,
} from '@aws-sdk/client-codebuild';
import { mockClient } from 'aws-sdk-client-mock';
import { DEFAULT_TEST_COMMAND } from '../../contract/job-types';
import { CHECKOUT_ENV } from '../../contract/runtime-env';
import { buildIdFromArn, buildStatus, parseCodeBuildEvent } from '../../src/adapters/codebuild-builds';
import { CodeBuildTestRunner, timeoutMinutes } from '../../src/adapters/codebuild-test-runner';
import { InvalidBuildEventError } from '../../src/core/build-completion';
import { RetryAfterError } from '../../src/core/errors';
import { buildIdempotencyToken, commandOf, runKey } from '../../src/core/jobs/command-stage';
import type { CommandRun } from '../../src/core/ports';
import { codeBuildStateChange } from '../support/codebuild-events';
import { runTestsMessage } from '../support/stage-messages';

// CodeBuild has no local emulator: its API is mocked (aws-sdk-client-mock).
const codebuild = mockClient(CodeBuildClient);
afterEach(() => codebuild.reset());

const sha = 'a'.repeat(40);
const FIRST_REQUEST = '2026-01-01T00:00:00.000Z';
function commandRun(
  options: { command?: string; timeoutSeconds?: number; jobId?: string; run?: number; requestedAt?: string } = {},
): CommandRun {
  const job = runTestsMessage({
    jobId: options.jobId ?? 'job-1',
    payload: options.command ? { command: options.command } : {},
    pin: { sha },
  });
  const run = options.run ?? 0;
  return {
    job,
    run,
    key: runKey(job, run, options.requestedAt ?? FIRST_REQUEST),
    command: commandOf(job),
    timeoutSeconds: options.timeoutSeconds ?? 3600,
  };
}

describe('CodeBuildTestRunner.start', () => {
  it('starts the project with the pinned commit, the job and its run in the environment, a run-derived token and the timeout', async () => {
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:build-1' } });
    const runner = new CodeBuildTestRunner(new CodeBuildClient({}), 'tests-project');

    await expect(runner.start(commandRun({ command: 'make check', timeoutSeconds: 90 }))).resolves.toEqual({
      buildId: 'tests:build-1',
    });

    const [call] = codebuild.commandCalls(StartBuildCommand);
    expect(call?.args[0].input).toEqual({
      projectName: 'tests-project',
      idempotencyToken: buildIdempotencyToken(commandRun()),
      timeoutInMinutesOverride: 5,
      environmentVariablesOverride: expect.arrayContaining([
        { name: 'REPO_URL', value: 'https://git.example/acme/widgets.git', type: 'PLAINTEXT' },
        { name: 'COMMIT_SHA', value: sha, type: 'PLAINTEXT' },
        { name: 'TEST_COMMAND', value: 'make check', type: 'PLAINTEXT' },
        { name: 'JOB_ID', value: 'job-1', type: 'PLAINTEXT' },
        { name: 'JOB_TYPE', value: 'run_tests', type: 'PLAINTEXT' },
        { name: 'JOB_RUN', value: '0', type: 'PLAINTEXT' },
        { name: 'JOB_RUN_KEY', value: commandRun().key, type: 'PLAINTEXT' },
      ]),
    });
    expect(call?.args[0].input.sourceVersion).toBeUndefined();
  });

  it("names the checkout credential by reference (the repository's checkout secret), never as a plain value", async () => {
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:build-3' } });
    const asked: string[] = [];
    const refs = [
      {
        name: CHECKOUT_ENV.username,
        value: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:checkout/x-AbCdEf:username::v1',
        type: 'SECRETS_MANAGER' as const,
      },
      {
        name: CHECKOUT_ENV.password,
        value: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:checkout/x-AbCdEf:password::v1',
        type: 'SECRETS_MANAGER' as const,
      },
    ];
    const checkout = { environmentFor: async (repoUrl: string) => (asked.push(repoUrl), refs) };

    await new CodeBuildTestRunner(new CodeBuildClient({}), 'p', checkout).start(commandRun());

    expect(asked).toEqual(['https://git.example/acme/widgets.git']);
    const variables = codebuild.commandCalls(StartBuildCommand)[0]?.args[0].input.environmentVariablesOverride ?? [];
    expect(variables.filter((v) => Object.values(CHECKOUT_ENV).includes(v.name as never))).toEqual(refs);
  });

  it("sends the stage's default command when the job names none, and a 2-hour timeout as asked", async () => {
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:build-2' } });
    await new CodeBuildTestRunner(new CodeBuildClient({}), 'p').start(commandRun({ timeoutSeconds: 2 * 3600 }));

    const input = codebuild.commandCalls(StartBuildCommand)[0]?.args[0].input;
    expect(input?.environmentVariablesOverride).toContainEqual({
      name: 'TEST_COMMAND',
      value: DEFAULT_TEST_COMMAND,
      type: 'PLAINTEXT',
    });
    expect(input?.timeoutInMinutesOverride).toBe(120);
  });

  it.each([
    ['AccountLimitExceededException', 'Cannot have more than 60 builds in queue for the account'],
    ['ThrottlingException', 'Rate exceeded'],
  ])(
    'a StartBuild refused with %s is a wait for the build quota, never a failure of the job',
    async (name, message) => {
      codebuild
        .on(StartBuildCommand)
        .rejects(Object.assign(new Error(message), { name, $metadata: { httpStatusCode: 400 } }));
      const runner = new CodeBuildTestRunner(new CodeBuildClient({}), 'tests-project');

      const error = await runner.start(commandRun()).catch((e: unknown) => e);

      expect(error).toBeInstanceOf(RetryAfterError);
      expect(error).toMatchObject({ limit: 'build-quota', retryAt: undefined, message: expect.stringContaining(name) });
    },
  );

  it('derives the same token for the same run, and another for another run, job, or job sent again under the same id', () => {
    expect(buildIdempotencyToken(commandRun())).toBe(buildIdempotencyToken(commandRun()));
    expect(buildIdempotencyToken(commandRun({ run: 1 }))).not.toBe(buildIdempotencyToken(commandRun()));
    expect(buildIdempotencyToken(commandRun({ jobId: 'job-2' }))).not.toBe(buildIdempotencyToken(commandRun()));
    expect(buildIdempotencyToken(commandRun({ requestedAt: '2026-01-02T00:00:00.000Z' }))).not.toBe(
      buildIdempotencyToken(commandRun()),
    );
  });

  it('clamps timeouts to what CodeBuild accepts', () => {
    expect(timeoutMinutes(1)).toBe(5);
    expect(timeoutMinutes(601)).toBe(11);
    expect(timeoutMinutes(8 * 3600)).toBe(480);
    expect(timeoutMinutes(10 ** 7)).toBe(480);
  });
});

describe('CodeBuildTestRunner.describe', () => {
  it('reads every build in one BatchGetBuilds; builds CodeBuild does not know are absent', async () => {
    codebuild.on(BatchGetBuildsCommand).resolves({
      builds: [
        { id: 'p:1', buildStatus: 'IN_PROGRESS' },
        { id: 'p:2', buildStatus: 'SUCCEEDED' },
      ],
      buildsNotFound: ['p:3'],
    });

    const statuses = await new CodeBuildTestRunner(new CodeBuildClient({}), 'p').describe(['p:1', 'p:2', 'p:3']);

    expect([...statuses]).toEqual([
      ['p:1', { state: 'RUNNING' }],
      ['p:2', { state: 'PASSED', exitCode: 0, logTail: '' }],
    ]);
    expect(codebuild.commandCalls(BatchGetBuildsCommand)).toHaveLength(1);
  });

  it('refuses more ids than one request takes, and asks nothing for none', async () => {
    const runner = new CodeBuildTestRunner(new CodeBuildClient({}), 'p');
    await expect(runner.describe(Array.from({ length: 101 }, (_, i) => `p:${i}`))).rejects.toThrow(/at most 100/);
    await expect(runner.describe([])).resolves.toEqual(new Map());
    expect(codebuild.calls()).toHaveLength(0);
  });
});

describe('CodeBuildTestRunner.stop (the build of a cancelled job)', () => {
  it('sends one StopBuild naming the build; a build that has ended already is answered as it is, without an error', async () => {
    codebuild.on(StopBuildCommand).resolves({ build: { id: 'p:1', buildStatus: 'SUCCEEDED', buildComplete: true } });
    await new CodeBuildTestRunner(new CodeBuildClient({}), 'p').stop('p:1');
    expect(codebuild.commandCalls(StopBuildCommand).map((c) => c.args[0].input)).toEqual([{ id: 'p:1' }]);
  });

  it('a build CodeBuild does not know has nothing to stop; any other refusal is thrown, for the reconciler to try again', async () => {
    const runner = new CodeBuildTestRunner(new CodeBuildClient({}), 'p');
    codebuild
      .on(StopBuildCommand, { id: 'p:gone' })
      .rejects(new ResourceNotFoundException({ message: 'Build not found', $metadata: {} }));
    codebuild
      .on(StopBuildCommand, { id: 'p:bad' })
      .rejects(new InvalidInputException({ message: 'bad id', $metadata: {} }));
    await expect(runner.stop('p:gone')).resolves.toBeUndefined();
    await expect(runner.stop('p:bad')).rejects.toThrow('bad id');
  });
});

describe('CodeBuildTestRunner.findBuild', () => {
  const withRun = (id: string, of: CommandRun): Build => ({
    id,
    environment: {
      type: 'LINUX_CONTAINER',
      image: 'i',
      computeType: 'BUILD_GENERAL1_SMALL',
      environmentVariables: [
        { name: 'JOB_ID', value: of.job.jobId },
        { name: 'JOB_RUN', value: String(of.run) },
        { name: 'JOB_RUN_KEY', value: of.key },
      ],
    },
  });

  it("finds the run's build by its JOB_ID, JOB_RUN and JOB_RUN_KEY among the project's newest builds, in one page", async () => {
    // p:6 is an earlier job's of the same id and run number (sent before the ledger forgot it): never this run's.
    const builds = [
      withRun('p:9', commandRun({ jobId: 'job-other' })),
      withRun('p:8', commandRun({ run: 1 })),
      withRun('p:7', commandRun()),
      withRun('p:6', commandRun({ run: 2, requestedAt: '2025-06-01T00:00:00.000Z' })),
    ];
    codebuild
      .on(ListBuildsForProjectCommand, { projectName: 'p', sortOrder: 'DESCENDING' })
      .resolves({ ids: ['p:9', 'p:8', 'p:7', 'p:6'], nextToken: 'page-2' });
    codebuild.on(BatchGetBuildsCommand, { ids: ['p:9', 'p:8', 'p:7', 'p:6'] }).resolves({ builds });
    const runner = new CodeBuildTestRunner(new CodeBuildClient({}), 'p');

    await expect(runner.findBuild(commandRun({ run: 0 }))).resolves.toBe('p:7');
    await expect(runner.findBuild(commandRun({ run: 1 }))).resolves.toBe('p:8');
    await expect(runner.findBuild(commandRun({ run: 2 }))).resolves.toBeUndefined();
    expect(codebuild.commandCalls(ListBuildsForProjectCommand)).toHaveLength(3);
    expect(codebuild.commandCalls(BatchGetBuildsCommand)).toHaveLength(3);
  });

  it('asks nothing more when the project has no builds', async () => {
    codebuild.on(ListBuildsForProjectCommand).resolves({ ids: [] });
    await expect(
      new CodeBuildTestRunner(new CodeBuildClient({}), 'p').findBuild(commandRun()),
    ).resolves.toBeUndefined();
    expect(codebuild.commandCalls(BatchGetBuildsCommand)).toHaveLength(0);
  });
});

describe('parseCodeBuildEvent', () => {
  const ids = { jobId: 'job-1', jobType: 'run_tests', sha };

  it('reads a SUCCEEDED build as a passed completion naming the job, its type and commit', () => {
    const event = codeBuildStateChange({ buildId: 'tests:b-1', status: 'SUCCEEDED', ...ids });

    expect(parseCodeBuildEvent(JSON.stringify(event))).toEqual({
      buildId: 'tests:b-1',
      ...ids,
      status: {
        state: 'PASSED',
        exitCode: 0,
        logTail: 'logs: https://console.aws.amazon.com/cloudwatch/home#logsV2:log-groups/tests',
      },
    });
  });

  it('reads a build that FAILED in its build phase as a failed verdict with the exit code', () => {
    const event = codeBuildStateChange({
      buildId: 'tests:b-2',
      status: 'FAILED',
      ...ids,
      failedPhase: {
        type: 'BUILD',
        context: 'COMMAND_EXECUTION_ERROR: Error while executing command: npm test. Reason: exit status 2',
      },
    });

    expect(parseCodeBuildEvent(JSON.stringify(event))?.status).toMatchObject({
      state: 'FAILED',
      exitCode: 2,
      logTail: expect.stringContaining('exit status 2'),
    });
  });

  it('reads a failed checkout (PRE_BUILD), FAULT and TIMED_OUT as a build that broke, not a verdict', () => {
    const checkout = codeBuildStateChange({
      buildId: 'tests:b-3',
      status: 'FAILED',
      ...ids,
      failedPhase: { type: 'PRE_BUILD', context: 'COMMAND_EXECUTION_ERROR: Reason: exit status 128' },
    });
    expect(parseCodeBuildEvent(JSON.stringify(checkout))?.status).toMatchObject({
      state: 'ERROR',
      status: 'FAILED',
      message: expect.stringMatching(/^PRE_BUILD phase failed/),
    });
    for (const status of ['FAULT', 'TIMED_OUT', 'STOPPED']) {
      expect(
        parseCodeBuildEvent(JSON.stringify(codeBuildStateChange({ buildId: 'tests:b-4', status, ...ids })))?.status,
      ).toMatchObject({ state: 'ERROR', status });
    }
  });

  it('ignores a build that is still in progress', () => {
    expect(
      parseCodeBuildEvent(
        JSON.stringify(codeBuildStateChange({ buildId: 'tests:b-5', status: 'IN_PROGRESS', ...ids })),
      ),
    ).toBeUndefined();
  });

  it('refuses what is not a completion it can read, naming why', () => {
    expect(() => parseCodeBuildEvent('not json')).toThrow(InvalidBuildEventError);
    expect(() =>
      parseCodeBuildEvent(JSON.stringify({ source: 'aws.s3', 'detail-type': 'Object Created', detail: {} })),
    ).toThrow(/not a CodeBuild Build State Change event/);
    const foreign = codeBuildStateChange({ buildId: 'tests:b-6', status: 'SUCCEEDED', ...ids });
    foreign.detail['additional-information'].environment['environment-variables'] = [];
    expect(() => parseCodeBuildEvent(JSON.stringify(foreign))).toThrow(/carries no JOB_ID/);
  });

  it('takes the build id from the build ARN as StartBuild returns it', () => {
    expect(buildIdFromArn('arn:aws:codebuild:eu-west-1:123456789012:build/tests-Project:5e9b')).toBe(
      'tests-Project:5e9b',
    );
  });
});

describe('buildStatus', () => {
  const logs = { deepLink: 'https://console.aws.amazon.com/cloudwatch/home#logEvent:group=/aws/codebuild/p' };
  const timing = { startTime: new Date('2026-11-29T10:00:00Z'), endTime: new Date('2026-11-29T10:01:30Z') };
  const failedIn = (phaseType: string, message: string): Build => ({
    id: 'b',
    buildStatus: 'FAILED',
    ...timing,
    logs,
    phases: [
      { phaseType: 'DOWNLOAD_SOURCE', phaseStatus: 'SUCCEEDED' },
      {
        phaseType: phaseType as 'BUILD',
        phaseStatus: 'FAILED',
        contexts: [{ statusCode: 'COMMAND_EXECUTION_ERROR', message }],
      },
    ],
  });

  it.each<Build['buildStatus']>([undefined, 'IN_PROGRESS'])('%s is RUNNING', (status) => {
    expect(buildStatus({ id: 'b', buildStatus: status })).toEqual({ state: 'RUNNING' });
  });

  it('SUCCEEDED is PASSED with exit code 0, the duration and the log link', () => {
    expect(buildStatus({ id: 'b', buildStatus: 'SUCCEEDED', ...timing, logs })).toEqual({
      state: 'PASSED',
      exitCode: 0,
      durationMs: 90_000,
      logTail: `logs: ${logs.deepLink}`,
    });
  });

  it('FAILED in the build phase is a FAILED verdict with the exit code from the phase context', () => {
    const status = buildStatus(failedIn('BUILD', 'Error while executing command: npm test. Reason: exit status 3'));

    expect(status).toEqual({
      state: 'FAILED',
      exitCode: 3,
      durationMs: 90_000,
      logTail: `BUILD: COMMAND_EXECUTION_ERROR: Error while executing command: npm test. Reason: exit status 3\nlogs: ${logs.deepLink}`,
    });
  });

  it('FAILED in a setup phase (e.g. the checkout) is an infrastructure ERROR, not a verdict', () => {
    const status = buildStatus(
      failedIn('PRE_BUILD', 'Error while executing command: git checkout. Reason: exit status 128'),
    );

    expect(status).toMatchObject({
      state: 'ERROR',
      status: 'FAILED',
      message: expect.stringMatching(/^PRE_BUILD phase failed: .*exit status 128/),
    });
  });

  it.each(['FAULT', 'TIMED_OUT', 'STOPPED'] as const)('%s is an infrastructure ERROR', (buildStatusValue) => {
    const status = buildStatus({
      id: 'b',
      buildStatus: buildStatusValue,
      logs: { groupName: '/aws/codebuild/p', streamName: 's-1' },
    });

    expect(status).toEqual({ state: 'ERROR', status: buildStatusValue, message: 'logs: /aws/codebuild/p/s-1' });
  });
});
