/**
 * The stack checks of `agent-jobs doctor` (tools/cli/doctor.ts). Emulated: there is no local
 * CloudFormation, CloudWatch, CloudWatch Logs, SNS, CodeBuild, EventBridge or Secrets Manager, so those clients are
 * mocked (aws-sdk-client-mock) with the answers AWS documents; the queues, the table and the bucket
 * the outputs name are real, on the local emulators (fauxqs, dynalite). The end-to-end job check
 * runs for real on the local platform in test/e2e/doctor.test.ts.
 */
import {
  CloudFormationClient,
  DescribeStacksCommand,
  ListStackResourcesCommand,
  type Output,
} from '@aws-sdk/client-cloudformation';
import { CloudWatchClient, DescribeAlarmHistoryCommand, SetAlarmStateCommand } from '@aws-sdk/client-cloudwatch';
import {
  CloudWatchLogsClient,
  DescribeLogGroupsCommand,
  type DescribeLogGroupsCommandInput,
} from '@aws-sdk/client-cloudwatch-logs';
import { BatchGetProjectsCommand, CodeBuildClient } from '@aws-sdk/client-codebuild';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DescribeEventBusCommand, EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetTopicAttributesCommand, SNSClient } from '@aws-sdk/client-sns';
import { generateKeyPairSync } from 'node:crypto';
import { mockClient } from 'aws-sdk-client-mock';
import { SECRET_PLACEHOLDER } from '../../contract/runtime-env';
import {
  BUILD_RECONCILER_LOG_GROUP_OUTPUT,
  STACK_OUTPUTS,
  dlqUrlOutputKey,
  logGroupOutputKey,
  queueUrlOutputKey,
} from '../../contract/stack-outputs';
import {
  checkAlarmNotification,
  checkGitHubApps,
  checkOutputs,
  checkSecrets,
  checkStack,
  expectedOutputKeys,
  type Clock,
  type StackClients,
} from '../../tools/cli/doctor';
import { LOCAL_REGION } from '../../tools/local/emulators';
import { withEmulators } from '../support/emulators';
import { startFakeGitHub } from '../support/fake-github';

const cloudFormation = mockClient(CloudFormationClient);
const cloudWatch = mockClient(CloudWatchClient);
const secretsManager = mockClient(SecretsManagerClient);
const sns = mockClient(SNSClient);
const codeBuild = mockClient(CodeBuildClient);
const eventBridge = mockClient(EventBridgeClient);
const logs = mockClient(CloudWatchLogsClient);
afterEach(() =>
  [cloudFormation, cloudWatch, secretsManager, sns, codeBuild, eventBridge, logs].forEach((m) => m.reset()),
);

const emulators = withEmulators();
const ACCOUNT = '123456789012';
const TOPIC = `arn:aws:sns:eu-west-1:${ACCOUNT}:AgentJobs-prod-AlarmTopicD01E77F9-abc`;
const secretArn = (name: string) => `arn:aws:secretsmanager:eu-west-1:${ACCOUNT}:secret:${name}-AbCdEf`;
const SECRETS = {
  git: secretArn('GitCredentials'),
  read: secretArn('GitReadCredentials'),
  token: secretArn('GithubToken'),
};

let dynamodb: DynamoDBClient;
beforeAll(() => {
  dynamodb = new DynamoDBClient({
    region: LOCAL_REGION,
    endpoint: emulators().endpoints.dynamodb,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
});
afterAll(() => dynamodb.destroy());

function clients(): StackClients {
  const region = { region: 'eu-west-1' };
  return {
    cloudFormation: new CloudFormationClient(region),
    cloudWatch: new CloudWatchClient(region),
    logs: new CloudWatchLogsClient(region),
    secretsManager: new SecretsManagerClient(region),
    sns: new SNSClient(region),
    codeBuild: new CodeBuildClient(region),
    eventBridge: new EventBridgeClient(region),
    dynamodb,
    sqs: emulators().clients.sqs,
    s3: emulators().clients.s3,
  };
}

/** The outputs of a stack whose queues, table and bucket are the emulators'. */
function stackOutputs(): Output[] {
  const e = emulators();
  const values: Record<string, string> = {
    ...Object.fromEntries(
      e.topology.flatMap((q) => [
        [queueUrlOutputKey(q.name), e.queueUrls[q.name]!],
        [dlqUrlOutputKey(q.name), e.dlqUrls[q.name]!],
      ]),
    ),
    [STACK_OUTPUTS.ledgerTableName]: e.tableName,
    [STACK_OUTPUTS.diffBucketName]: e.bucketName,
    [STACK_OUTPUTS.eventBusName]: 'AgentJobsprodEventBus',
    [STACK_OUTPUTS.alarmTopicArn]: TOPIC,
    [STACK_OUTPUTS.testRunnerProjectName]: 'TestRunnerProject-abc',
    [STACK_OUTPUTS.gitCredentialsSecretArn]: SECRETS.git,
    [STACK_OUTPUTS.gitReadCredentialsSecretArn]: SECRETS.read,
    [STACK_OUTPUTS.githubTokenSecretArn]: SECRETS.token,
    ...Object.fromEntries(LOG_GROUP_KEYS.map((key) => [key, logGroupName(key)])),
  };
  return Object.entries(values).map(([OutputKey, OutputValue]) => ({ OutputKey, OutputValue }));
}

const LOG_GROUP_KEYS = expectedOutputKeys().filter((key) => key.startsWith('LogGroup'));
const logGroupName = (key: string) => `AgentJobs-prod-${key}-Ab12`;

/** CloudWatch Logs as AWS answers DescribeLogGroups: the account's groups whose name has the prefix, sorted by name. */
function answerLogGroups(names: readonly string[]): void {
  logs.on(DescribeLogGroupsCommand).callsFake((input: DescribeLogGroupsCommandInput) => ({
    logGroups: names
      .filter((name) => name.startsWith(input.logGroupNamePrefix ?? ''))
      .sort()
      .slice(0, input.limit ?? 50)
      .map((logGroupName) => ({ logGroupName, retentionInDays: 30 })),
  }));
}

function answerForAwsOnlyResources(): void {
  answerLogGroups(LOG_GROUP_KEYS.map(logGroupName));
  eventBridge.on(DescribeEventBusCommand).resolves({ Name: 'AgentJobsprodEventBus' });
  sns.on(GetTopicAttributesCommand, { TopicArn: TOPIC }).resolves({ Attributes: { SubscriptionsConfirmed: '1' } });
  codeBuild.on(BatchGetProjectsCommand).resolves({ projects: [{ name: 'TestRunnerProject-abc' }] });
}

/** Virtual time: sleep() advances now(), so a deadline passes without waiting. */
function fakeClock(): Clock & { slept: number } {
  let now = Date.parse('2026-12-01T10:00:00Z');
  const clock = {
    slept: 0,
    now: () => now,
    sleep: async (ms: number) => {
      now += ms;
      clock.slept += ms;
    },
  };
  return clock;
}

describe('outputs', () => {
  it('finds every output and every resource it names answering', async () => {
    answerForAwsOnlyResources();
    const results = await checkOutputs(stackOutputs(), clients());
    expect(results.map((r) => r.check)).toEqual(expectedOutputKeys().map((k) => `output ${k}`));
    expect(results.filter((r) => r.status !== 'pass')).toEqual([]);
    expect(results.find((r) => r.check === `output ${STACK_OUTPUTS.ledgerTableName}`)?.detail).toMatch(/^table ACTIVE/);
    expect(LOG_GROUP_KEYS).toEqual(
      expect.arrayContaining([
        logGroupOutputKey('sequencer'),
        logGroupOutputKey('open_pr'),
        BUILD_RECONCILER_LOG_GROUP_OUTPUT,
      ]),
    );
    expect(results.find((r) => r.check === `output ${logGroupOutputKey('sequencer')}`)?.detail).toBe(
      'log group answers, retention 30 days',
    );
  });

  it("names a function's log group that is gone, even beside another whose name starts with its own", async () => {
    answerForAwsOnlyResources();
    const gone = logGroupName(logGroupOutputKey('run_tests'));
    answerLogGroups([...LOG_GROUP_KEYS.map(logGroupName).filter((name) => name !== gone), `${gone}-old`]);
    const failed = (await checkOutputs(stackOutputs(), clients())).filter((r) => r.status === 'fail');
    expect(failed).toEqual([
      {
        check: `output ${logGroupOutputKey('run_tests')}`,
        status: 'fail',
        detail: `Error: log group ${gone} not found`,
      },
    ]);
  });

  it('names a missing output, a queue that does not exist and a project CodeBuild does not know', async () => {
    answerForAwsOnlyResources();
    codeBuild.on(BatchGetProjectsCommand).resolves({ projects: [], projectsNotFound: ['TestRunnerProject-abc'] });
    const outputs = stackOutputs()
      .filter((o) => o.OutputKey !== STACK_OUTPUTS.alarmTopicArn)
      .map((o) => (o.OutputKey === dlqUrlOutputKey('open-pr') ? { ...o, OutputValue: `${o.OutputValue}-gone` } : o));
    const failed = (await checkOutputs(outputs, clients())).filter((r) => r.status === 'fail');
    expect(failed).toEqual([
      {
        check: `output ${dlqUrlOutputKey('open-pr')}`,
        status: 'fail',
        detail: expect.stringMatching(/NonExistentQueue|does not exist/),
      },
      {
        check: `output ${STACK_OUTPUTS.alarmTopicArn}`,
        status: 'fail',
        detail: expect.stringMatching(/missing from the stack outputs/),
      },
      {
        check: `output ${STACK_OUTPUTS.testRunnerProjectName}`,
        status: 'fail',
        detail: 'Error: CodeBuild project TestRunnerProject-abc not found',
      },
    ]);
  });
});

describe('alarm notification', () => {
  const resource = (ResourceType: string, LogicalResourceId: string, PhysicalResourceId: string) => ({
    ResourceType,
    LogicalResourceId,
    PhysicalResourceId,
    ResourceStatus: 'CREATE_COMPLETE' as const,
    LastUpdatedTimestamp: new Date(),
  });
  const alarms = {
    StackResourceSummaries: [
      resource('AWS::CloudWatch::Alarm', 'sequencerQueueOldestMessageAlarm1C8B494C', 'AgentJobs-prod-oldest'),
      resource('AWS::SQS::Queue', 'sequencerQueueB4E8369A', 'https://sqs/queue'),
      resource('AWS::CloudWatch::Alarm', 'sequencerQueueDlqDepthAlarm6682241C', 'AgentJobs-prod-dlq-depth'),
    ],
  };
  beforeEach(() => {
    cloudWatch.on(SetAlarmStateCommand).resolves({});
  });
  const check = (clock: Clock) =>
    checkAlarmNotification({
      stackName: 'AgentJobs-prod',
      topicArn: TOPIC,
      clients: clients(),
      clock,
      timeoutMs: 30_000,
      pollMs: 5_000,
    });
  const states = () =>
    cloudWatch.commandCalls(SetAlarmStateCommand).map((c) => [c.args[0].input.AlarmName, c.args[0].input.StateValue]);

  it('sets a DLQ depth alarm to ALARM, passes once its history records the SNS action as executed, and sets it back to OK', async () => {
    cloudFormation.on(ListStackResourcesCommand).resolves(alarms);
    cloudWatch
      .on(DescribeAlarmHistoryCommand)
      .resolvesOnce({ AlarmHistoryItems: [] })
      .resolves({
        AlarmHistoryItems: [
          {
            HistoryItemType: 'Action',
            HistorySummary: `Successfully executed action ${TOPIC}`,
            HistoryData: JSON.stringify({ actionState: 'Succeeded', notificationResource: TOPIC }),
          },
        ],
      });
    const clock = fakeClock();
    const result = await check(clock);
    expect(result).toEqual({
      check: 'alarm notification reaches the topic',
      status: 'pass',
      detail: `AgentJobs-prod-dlq-depth: Successfully executed action ${TOPIC}`,
    });
    expect(states()).toEqual([
      ['AgentJobs-prod-dlq-depth', 'ALARM'],
      ['AgentJobs-prod-dlq-depth', 'OK'],
    ]);
    expect(clock.slept).toBe(5_000);
  });

  it("fails with CloudWatch's own words when the action failed (e.g. the topic policy or key refused it)", async () => {
    cloudFormation.on(ListStackResourcesCommand).resolves(alarms);
    const refused = `Failed to execute action ${TOPIC}. Received error: "CloudWatch Alarms does not have authorization to access the SNS topic encryption key."`;
    cloudWatch.on(DescribeAlarmHistoryCommand).resolves({
      AlarmHistoryItems: [
        {
          HistorySummary: refused,
          HistoryData: JSON.stringify({ actionState: 'Failed', notificationResource: TOPIC }),
        },
      ],
    });
    expect(await check(fakeClock())).toEqual({
      check: 'alarm notification reaches the topic',
      status: 'fail',
      detail: `AgentJobs-prod-dlq-depth: ${refused}`,
    });
    expect(states()).toEqual([
      ['AgentJobs-prod-dlq-depth', 'ALARM'],
      ['AgentJobs-prod-dlq-depth', 'OK'],
    ]);
  });

  it('fails at its deadline with the last thing it saw, and still sets the alarm back to OK', async () => {
    cloudFormation.on(ListStackResourcesCommand).resolves(alarms);
    cloudWatch.on(DescribeAlarmHistoryCommand).resolves({
      AlarmHistoryItems: [
        { HistorySummary: 'Successfully executed action arn:aws:sns:eu-west-1:123456789012:another-topic' },
      ],
    });
    const result = await check(fakeClock());
    expect(result.status).toBe('fail');
    expect(result.detail).toBe(
      `AgentJobs-prod-dlq-depth: after 30 s, actions recorded, none for ${TOPIC}: Successfully executed action arn:aws:sns:eu-west-1:123456789012:another-topic`,
    );
    expect(states().at(-1)).toEqual(['AgentJobs-prod-dlq-depth', 'OK']);
  });

  it('fails naming the stack when it has no alarm', async () => {
    cloudFormation.on(ListStackResourcesCommand).resolves({ StackResourceSummaries: [] });
    expect(await check(fakeClock())).toMatchObject({
      status: 'fail',
      detail: 'stack AgentJobs-prod has no CloudWatch alarm',
    });
    expect(states()).toEqual([]);
  });
});

describe('secrets', () => {
  const values = { username: 'x-access-token', password: 'ghp_doNotPrintThis' };
  it('passes documented shapes, and fails a placeholder or a wrong shape naming the secret, never printing a value', async () => {
    secretsManager
      .on(GetSecretValueCommand, { SecretId: SECRETS.git })
      .resolves({ SecretString: JSON.stringify(values) })
      .on(GetSecretValueCommand, { SecretId: SECRETS.read })
      .resolves({ SecretString: JSON.stringify({ username: SECRET_PLACEHOLDER, password: SECRET_PLACEHOLDER }) })
      .on(GetSecretValueCommand, { SecretId: SECRETS.token })
      .resolves({ SecretString: JSON.stringify({ user: 'x', pass: 'ghp_doNotPrintThisEither' }) });
    const results = await checkSecrets(stackOutputs(), clients().secretsManager);
    expect(results).toEqual([
      {
        check: `secret ${STACK_OUTPUTS.gitCredentialsSecretArn}`,
        status: 'pass',
        detail: `${SECRETS.git} holds the documented shape`,
      },
      {
        check: `secret ${STACK_OUTPUTS.gitReadCredentialsSecretArn}`,
        status: 'fail',
        detail: expect.stringContaining(`secret ${SECRETS.read} still holds the placeholder ${SECRET_PLACEHOLDER}`),
      },
      {
        check: `secret ${STACK_OUTPUTS.githubTokenSecretArn}`,
        status: 'fail',
        detail: expect.stringContaining(`secret ${SECRETS.token} is malformed`),
      },
    ]);
    expect(JSON.stringify(results)).not.toMatch(/doNotPrint/);
  });
});

describe('a GitHub App in a secret (a loopback GitHub: GitHub has no local stand-in)', () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const writeBoth = { contents: 'write', pull_requests: 'write', metadata: 'read' };

  async function checkApps(
    permissions: Record<string, string>,
    secret: Record<string, unknown>,
    repoUrl = 'https://github.com/acme/widgets.git',
  ) {
    const github = await startFakeGitHub({
      app: { appId: '4242', publicKey, installations: { acme: { id: 77, permissions } }, now: () => Date.now() },
    });
    secretsManager
      .on(GetSecretValueCommand, { SecretId: SECRETS.git })
      .resolves({ SecretString: JSON.stringify({ appId: 4242, privateKey, ...secret }) })
      .on(GetSecretValueCommand, { SecretId: SECRETS.token })
      .resolves({ SecretString: 'ghp_token' });
    try {
      return await checkGitHubApps({
        outputs: stackOutputs(),
        secretsManager: clients().secretsManager,
        repoUrl,
        githubApiUrl: github.url,
      });
    } finally {
      await github.close();
    }
  }

  it('passes an app installed on the repository with contents and pull_requests: write', async () => {
    expect(await checkApps(writeBoth, { installationId: 77 })).toEqual([
      {
        check: 'GitHub App 4242',
        status: 'pass',
        detail: 'installed on acme/widgets (installation 77) with contents: write, pull_requests: write',
      },
    ]);
  });

  it('fails naming what is wrong: a missing permission, another installation, no installation on the owner; never printing the key', async () => {
    const [readOnly] = await checkApps({ contents: 'read', metadata: 'read' }, {});
    const [other] = await checkApps(writeBoth, { installationId: 78 });
    const [absent] = await checkApps(writeBoth, {}, 'https://github.com/elsewhere/widgets.git');

    expect(readOnly).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('installation 77 on acme/widgets lacks contents: write, pull_requests: write'),
    });
    expect(other).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining(
        'the secret names installation 78, but acme/widgets is reached by installation 77',
      ),
    });
    expect(absent).toMatchObject({ status: 'fail', detail: expect.stringContaining('Not Found') });
    expect(JSON.stringify([readOnly, other, absent])).not.toContain('PRIVATE KEY');
  });

  it('has nothing to say when no secret holds an app, and skips without --repo', async () => {
    secretsManager
      .on(GetSecretValueCommand)
      .resolves({ SecretString: JSON.stringify({ username: 'u', password: 'p' }) });
    expect(
      await checkGitHubApps({
        outputs: stackOutputs(),
        secretsManager: clients().secretsManager,
        githubApiUrl: 'https://github.invalid',
      }),
    ).toEqual([]);
    secretsManager
      .on(GetSecretValueCommand, { SecretId: SECRETS.token })
      .resolves({ SecretString: JSON.stringify({ appId: '4242', privateKey }) });
    expect(
      await checkGitHubApps({
        outputs: stackOutputs(),
        secretsManager: clients().secretsManager,
        githubApiUrl: 'https://github.invalid',
      }),
    ).toEqual([
      { check: 'GitHub App 4242', status: 'skip', detail: 'pass --repo to check its installation on the repository' },
    ]);
  });
});

it('checkStack reads the outputs from CloudFormation and runs every stack check; --skip-alarm leaves the alarms alone', async () => {
  cloudFormation.on(DescribeStacksCommand, { StackName: 'AgentJobs-prod' }).resolves({
    Stacks: [
      {
        StackName: 'AgentJobs-prod',
        CreationTime: new Date(),
        StackStatus: 'CREATE_COMPLETE',
        Outputs: stackOutputs(),
      },
    ],
  });
  answerForAwsOnlyResources();
  secretsManager.on(GetSecretValueCommand).resolves({ SecretString: JSON.stringify({ username: 'u', password: 'p' }) });
  secretsManager.on(GetSecretValueCommand, { SecretId: SECRETS.token }).resolves({ SecretString: 'ghp_token' });
  const results = await checkStack({
    stackName: 'AgentJobs-prod',
    clients: clients(),
    clock: fakeClock(),
    skipAlarm: true,
  });
  expect(results.map((r) => r.status)).toEqual([
    ...expectedOutputKeys().map(() => 'pass'),
    'skip',
    'pass',
    'pass',
    'pass',
  ]);
  expect(cloudWatch.commandCalls(SetAlarmStateCommand)).toEqual([]);
});
