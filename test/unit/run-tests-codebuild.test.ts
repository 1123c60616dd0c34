import { BatchGetBuildsCommand, CodeBuildClient, ListBuildsForProjectCommand, StartBuildCommand, type Build } from '@aws-sdk/client-codebuild';
import { mockClient } from 'aws-sdk-client-mock';
import { CodeBuildTestRunner, buildStatus, timeoutMinutes } from '../../src/adapters/codebuild-test-runner';
import { runTestsMessage } from '../support/stage-messages';
import type { StageMessage } from '../../src/core/envelope';
import { DEFAULT_TEST_COMMAND, buildIdempotencyToken } from '../../src/core/jobs/run-tests';

// CodeBuild has no local emulator: its API is mocked (aws-sdk-client-mock).
const codebuild = mockClient(CodeBuildClient);
afterEach(() => codebuild.reset());

const sha = 'a'.repeat(40);
function job(payload: StageMessage<'run_tests'>['payload'] = {}, jobId = 'job-1'): StageMessage<'run_tests'> {
  return runTestsMessage({ jobId, payload, pin: { sha } });
}

describe('CodeBuildTestRunner.start', () => {
  it('starts the project with the pinned commit in the environment and a job-derived idempotency token', async () => {
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:build-1' } });
    const runner = new CodeBuildTestRunner(new CodeBuildClient({}), 'tests-project');

    await expect(runner.start(job({ command: 'make check', timeoutSeconds: 90 }))).resolves.toEqual({ buildId: 'tests:build-1' });

    const [call] = codebuild.commandCalls(StartBuildCommand);
    expect(call?.args[0].input).toEqual({
      projectName: 'tests-project',
      idempotencyToken: buildIdempotencyToken('job-1'),
      timeoutInMinutesOverride: 5,
      environmentVariablesOverride: expect.arrayContaining([
        { name: 'REPO_URL', value: 'https://git.example/acme/widgets.git', type: 'PLAINTEXT' },
        { name: 'COMMIT_SHA', value: sha, type: 'PLAINTEXT' },
        { name: 'TEST_COMMAND', value: 'make check', type: 'PLAINTEXT' },
        { name: 'JOB_ID', value: 'job-1', type: 'PLAINTEXT' },
      ]),
    });
    expect(call?.args[0].input.sourceVersion).toBeUndefined();
  });

  it('uses the default test command and no timeout override when the job names neither', async () => {
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:build-2' } });
    await new CodeBuildTestRunner(new CodeBuildClient({}), 'p').start(job());

    const input = codebuild.commandCalls(StartBuildCommand)[0]?.args[0].input;
    expect(input?.environmentVariablesOverride).toContainEqual({ name: 'TEST_COMMAND', value: DEFAULT_TEST_COMMAND, type: 'PLAINTEXT' });
    expect(input).not.toHaveProperty('timeoutInMinutesOverride');
  });

  it('derives the same token for the same job and different tokens for different jobs', () => {
    expect(buildIdempotencyToken('job-1')).toBe(buildIdempotencyToken('job-1'));
    expect(buildIdempotencyToken('job-1')).not.toBe(buildIdempotencyToken('job-2'));
  });

  it('clamps timeouts to what CodeBuild accepts', () => {
    expect(timeoutMinutes(1)).toBe(5);
    expect(timeoutMinutes(601)).toBe(11);
    expect(timeoutMinutes(8 * 3600)).toBe(480);
    expect(timeoutMinutes(10 ** 7)).toBe(2160);
  });
});

describe('CodeBuildTestRunner.poll', () => {
  it('reads the build with BatchGetBuilds', async () => {
    codebuild.on(BatchGetBuildsCommand, { ids: ['tests:build-1'] }).resolves({ builds: [{ id: 'tests:build-1', buildStatus: 'IN_PROGRESS' }] });

    await expect(new CodeBuildTestRunner(new CodeBuildClient({}), 'p').poll('tests:build-1')).resolves.toEqual({ state: 'RUNNING' });
  });

  it('fails when CodeBuild does not know the build', async () => {
    codebuild.on(BatchGetBuildsCommand).resolves({ builds: [], buildsNotFound: ['tests:gone'] });

    await expect(new CodeBuildTestRunner(new CodeBuildClient({}), 'p').poll('tests:gone')).rejects.toThrow(/build tests:gone not found/);
  });
});

describe('CodeBuildTestRunner.findBuild', () => {
  const withJob = (id: string, jobId: string): Build => ({ id, environment: { type: 'LINUX_CONTAINER', image: 'i', computeType: 'BUILD_GENERAL1_SMALL', environmentVariables: [{ name: 'JOB_ID', value: jobId }] } });

  it("finds the job's build by its JOB_ID variable, newest builds first, across pages", async () => {
    codebuild
      .on(ListBuildsForProjectCommand, { projectName: 'p', sortOrder: 'DESCENDING', nextToken: undefined })
      .resolves({ ids: ['p:9', 'p:8'], nextToken: 'page-2' })
      .on(ListBuildsForProjectCommand, { projectName: 'p', sortOrder: 'DESCENDING', nextToken: 'page-2' })
      .resolves({ ids: ['p:7'] });
    codebuild
      .on(BatchGetBuildsCommand, { ids: ['p:9', 'p:8'] })
      .resolves({ builds: [withJob('p:9', 'job-other'), withJob('p:8', 'job-2')] })
      .on(BatchGetBuildsCommand, { ids: ['p:7'] })
      .resolves({ builds: [withJob('p:7', 'job-1')] });

    await expect(new CodeBuildTestRunner(new CodeBuildClient({}), 'p').findBuild(job())).resolves.toBe('p:7');
  });

  it('gives up after a few pages and when the project has no more builds', async () => {
    codebuild.on(ListBuildsForProjectCommand).resolves({ ids: ['p:9'], nextToken: 'more' });
    codebuild.on(BatchGetBuildsCommand).resolves({ builds: [withJob('p:9', 'job-other')] });

    await expect(new CodeBuildTestRunner(new CodeBuildClient({}), 'p').findBuild(job())).resolves.toBeUndefined();
    expect(codebuild.commandCalls(ListBuildsForProjectCommand)).toHaveLength(3);

    codebuild.reset();
    codebuild.on(ListBuildsForProjectCommand).resolves({ ids: [] });
    await expect(new CodeBuildTestRunner(new CodeBuildClient({}), 'p').findBuild(job())).resolves.toBeUndefined();
    expect(codebuild.commandCalls(BatchGetBuildsCommand)).toHaveLength(0);
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
      { phaseType: phaseType as 'BUILD', phaseStatus: 'FAILED', contexts: [{ statusCode: 'COMMAND_EXECUTION_ERROR', message }] },
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
    const status = buildStatus(failedIn('PRE_BUILD', 'Error while executing command: git checkout. Reason: exit status 128'));

    expect(status).toMatchObject({ state: 'ERROR', status: 'FAILED', message: expect.stringMatching(/^PRE_BUILD phase failed: .*exit status 128/) });
  });

  it.each(['FAULT', 'TIMED_OUT', 'STOPPED'] as const)('%s is an infrastructure ERROR', (buildStatusValue) => {
    const status = buildStatus({ id: 'b', buildStatus: buildStatusValue, logs: { groupName: '/aws/codebuild/p', streamName: 's-1' } });

    expect(status).toEqual({ state: 'ERROR', status: buildStatusValue, message: 'logs: /aws/codebuild/p/s-1' });
  });
});
