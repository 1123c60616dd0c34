/**
 * The platform stack, synthesized once with an alarm e-mail set: one snapshot (made stable by
 * asset-hash-serializer.ts) plus a targeted assertion for every infrastructure rule of docs/design.md.
 */
import { Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { allWorkers } from '../../contract/job-types';
import { ENV, JOB_METRICS, METRICS_NAMESPACE, MAX_MESSAGE_BYTES, TEST_BUILD_ENV, stageQueueUrlEnv } from '../../contract/runtime-env';
import { DLQ_RETENTION_DAYS, LEDGER_TABLE, VISIBILITY_TIMEOUT_FACTOR, queueTopology } from '../../contract/topology';
import type { AgentJobsStack } from '../../lib/agent-jobs-stack';
import { STACK_OUTPUTS, dlqUrlOutputKey, queueUrlOutputKey } from '../../contract/stack-outputs';
import { addStack, nagFindings, newApp, synth } from './helpers';

type Resource = { Type: string; Properties: Record<string, any> };

let stack: AgentJobsStack;
let template: Template;
let app: ReturnType<typeof newApp>;

beforeAll(() => {
  ({ app, stack, template } = synth({ alarmEmail: 'ops@example.com' }));
});

const resources = (type: string): [string, Resource][] => Object.entries(template.findResources(type)) as [string, Resource][];
const logicalId = (construct: { node: { defaultChild?: unknown } }): string => stack.getLogicalId(construct.node.defaultChild as never);
const lane = (consumer: string) => {
  const found = stack.lanes.find((l) => l.spec.consumer === consumer);
  if (!found) throw new Error(`no lane for ${consumer}`);
  return found;
};
const policyStatements = (consumer: string): { Action: string | string[]; Resource: unknown }[] => {
  const roleId = logicalId(lane(consumer).worker.role);
  const policies = resources('AWS::IAM::Policy').filter(([, p]) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: roleId }]));
  return policies.flatMap(([, p]) => p.Properties.PolicyDocument.Statement);
};
const actionsOf = (statements: { Action: string | string[] }[]): string[] => statements.flatMap((s) => [s.Action].flat());

it('matches the snapshot', () => {
  expect(template.toJSON()).toMatchSnapshot();
});

describe('queues', () => {
  it('the agent-jobs queue and its DLQ are FIFO in high-throughput mode with explicit deduplication ids', () => {
    const fifo = lane('sequencer').queue;
    for (const queue of [fifo.queue, fifo.deadLetterQueue]) {
      expect(template.toJSON().Resources[logicalId(queue)].Properties).toMatchObject({
        FifoQueue: true,
        DeduplicationScope: 'messageGroup',
        FifoThroughputLimit: 'perMessageGroupId',
        ContentBasedDeduplication: false,
      });
    }
  });

  it('every queue and DLQ: 1 MiB max size, SQS-managed SSE, HTTPS-only policy', () => {
    const queues = resources('AWS::SQS::Queue');
    expect(queues).toHaveLength(queueTopology().length * 2);
    for (const [id, queue] of queues) {
      expect(queue.Properties).toMatchObject({ MaximumMessageSize: MAX_MESSAGE_BYTES, SqsManagedSseEnabled: true });
      template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: id }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: 'Deny', Action: 'sqs:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
          ]),
        },
      });
    }
  });

  it('every consumed queue: visibility >= 6 x its function timeout and maxReceiveCount >= 5', () => {
    const functions = template.toJSON().Resources;
    const mappings = resources('AWS::Lambda::EventSourceMapping');
    expect(mappings).toHaveLength(allWorkers().length);
    for (const [, mapping] of mappings) {
      const queue = functions[mapping.Properties.EventSourceArn['Fn::GetAtt'][0]].Properties;
      const fn = functions[mapping.Properties.FunctionName.Ref].Properties;
      expect(queue.VisibilityTimeout).toBeGreaterThanOrEqual(VISIBILITY_TIMEOUT_FACTOR * fn.Timeout);
      expect(queue.RedrivePolicy.maxReceiveCount).toBeGreaterThanOrEqual(5);
    }
  });

  it('every stage queue is a standard queue with its own standard DLQ', () => {
    for (const { queue } of stack.lanes.filter((l) => !l.spec.fifo)) {
      expect(queue.queue.fifo).toBe(false);
      expect(template.toJSON().Resources[logicalId(queue.queue)].Properties.RedrivePolicy.deadLetterTargetArn).toEqual({
        'Fn::GetAtt': [logicalId(queue.deadLetterQueue as sqs.Queue), 'Arn'],
      });
    }
  });
});

describe('functions', () => {
  it('every event source mapping reports batch item failures with explicit batch size and concurrency from the catalog', () => {
    for (const { spec, queue, worker } of stack.lanes) {
      template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        EventSourceArn: { 'Fn::GetAtt': [logicalId(queue.queue), 'Arn'] },
        FunctionName: { Ref: logicalId(worker.function) },
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        BatchSize: spec.worker.batchSize,
        ScalingConfig: { MaximumConcurrency: spec.worker.maxConcurrency },
        MetricsConfig: { Metrics: ['EventCount'] },
      });
    }
  });

  it('every function: Node.js 22 or newer, ARM64, tracing, its own explicit log group and its own role', () => {
    const functions = resources('AWS::Lambda::Function');
    expect(functions).toHaveLength(allWorkers().length);
    const roles = new Set<string>();
    for (const [, fn] of functions) {
      expect(Number(/^nodejs(\d+)\.x$/.exec(fn.Properties.Runtime)?.[1])).toBeGreaterThanOrEqual(22);
      expect(fn.Properties).toMatchObject({ Architectures: ['arm64'], TracingConfig: { Mode: 'Active' } });
      const logGroup = fn.Properties.LoggingConfig.LogGroup.Ref;
      expect(template.toJSON().Resources[logGroup]).toMatchObject({ Type: 'AWS::Logs::LogGroup', Properties: { RetentionInDays: 30 } });
      roles.add(fn.Properties.Role['Fn::GetAtt'][0]);
    }
    expect(roles.size).toBe(functions.length);
    template.resourceCountIs('Custom::LogRetention', 0);
    for (const [, role] of resources('AWS::IAM::Role')) expect(role.Properties.ManagedPolicyArns).toBeUndefined();
  });

  it('sets the runtime environment from contract/runtime-env.ts, secrets by ARN only', () => {
    const env = (consumer: string) => template.toJSON().Resources[logicalId(lane(consumer).worker.function)].Properties.Environment.Variables;
    const ref = (construct: { node: { defaultChild?: unknown } }) => ({ Ref: logicalId(construct) });
    const sequencer = env('sequencer');
    expect(sequencer).toMatchObject({
      [ENV.ledgerTable]: ref(stack.ledger.table),
      [ENV.eventBus]: ref(stack.eventBus),
      [ENV.dlqUrl]: ref(lane('sequencer').queue.deadLetterQueue as sqs.Queue),
      [ENV.diffBucket]: ref(stack.diffBucket),
      [ENV.gitCredentialsSecretArn]: { Ref: 'GitCredentials8CA32E0F' },
      [ENV.maxReceiveCount]: '5',
      [ENV.leaseSeconds]: '120',
      [ENV.ledgerRetentionDays]: '30',
      [stageQueueUrlEnv('run_tests')]: ref(lane('run_tests').queue.queue),
      [stageQueueUrlEnv('open_pr')]: ref(lane('open_pr').queue.queue),
    });
    expect(env('run_tests')).toMatchObject({ [ENV.testRunnerProject]: ref(stack.testRunner.project), [ENV.dlqUrl]: ref(lane('run_tests').queue.deadLetterQueue as sqs.Queue) });
    expect(env('open_pr')).toMatchObject({ [ENV.githubTokenSecretArn]: { Ref: 'GithubTokenF8738152' }, [ENV.githubApiUrl]: 'https://api.github.com' });
    expect(env('run_tests')).not.toHaveProperty(ENV.gitCredentialsSecretArn);
    expect(env('open_pr')).not.toHaveProperty(ENV.gitCredentialsSecretArn);
  });
});

describe('least privilege', () => {
  it('run_tests may start and read builds of exactly its one project and reads no secret', () => {
    const statements = policyStatements('run_tests');
    const codebuild = statements.filter((s) => actionsOf([s]).some((a) => a.startsWith('codebuild:')));
    expect(codebuild).toEqual([
      expect.objectContaining({ Action: ['codebuild:BatchGetBuilds', 'codebuild:ListBuildsForProject', 'codebuild:StartBuild'], Resource: { 'Fn::GetAtt': [logicalId(stack.testRunner.project), 'Arn'] } }),
    ]);
    expect(actionsOf(statements).filter((a) => a.startsWith('secretsmanager:') || a.startsWith('s3:'))).toEqual([]);
  });

  it('open_pr may read only the GitHub token secret and starts no build', () => {
    const statements = policyStatements('open_pr');
    const secrets = statements.filter((s) => actionsOf([s]).some((a) => a.startsWith('secretsmanager:')));
    expect(secrets).toEqual([expect.objectContaining({ Resource: { Ref: 'GithubTokenF8738152' } })]);
    expect(actionsOf(statements).filter((a) => a.startsWith('codebuild:') || a.startsWith('s3:'))).toEqual([]);
  });

  it('the sequencer consumes its queue, sends to its DLQ and the stage queues, reads git credentials and diffs only', () => {
    const statements = policyStatements('sequencer');
    const send = statements.find((s) => actionsOf([s]).includes('sqs:SendMessage'));
    const arn = (q: { node: { defaultChild?: unknown } }) => ({ 'Fn::GetAtt': [logicalId(q), 'Arn'] });
    expect(send?.Resource).toEqual(expect.arrayContaining([arn(lane('sequencer').queue.deadLetterQueue as sqs.Queue), arn(lane('run_tests').queue.queue), arn(lane('open_pr').queue.queue)]));
    expect((send?.Resource as unknown[]).length).toBe(3);
    expect(statements.filter((s) => actionsOf([s]).some((a) => a.startsWith('secretsmanager:')))).toEqual([
      expect.objectContaining({ Resource: { Ref: 'GitCredentials8CA32E0F' } }),
    ]);
    expect(actionsOf(statements).filter((a) => a.startsWith('s3:'))).toEqual(['s3:GetObject', 's3:ListBucket']);
    expect(actionsOf(statements).filter((a) => a.startsWith('codebuild:'))).toEqual([]);
  });

  it('every function reaches the ledger table and its index by exact ARN, and no wildcard but X-Ray', () => {
    for (const { spec } of stack.lanes) {
      const statements = policyStatements(spec.consumer);
      const wildcard = statements.filter((s) => s.Resource === '*');
      expect(actionsOf(wildcard).sort()).toEqual(['xray:PutTelemetryRecords', 'xray:PutTraceSegments']);
      expect(actionsOf(statements).filter((a) => a.includes('*'))).toEqual([]);
      const table = logicalId(stack.ledger.table);
      expect(statements).toContainEqual(expect.objectContaining({
        Action: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:UpdateItem'],
        Resource: [{ 'Fn::GetAtt': [table, 'Arn'] }, { 'Fn::Join': ['', [{ 'Fn::GetAtt': [table, 'Arn'] }, `/index/${LEDGER_TABLE.workspaceIndex.name}`]] }],
      }));
    }
  });
});

describe('data stores', () => {
  it('ledger table: on-demand, TTL, PITR, encryption, the byWorkspace index', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{ AttributeName: LEDGER_TABLE.partitionKey, KeyType: 'HASH' }],
      TimeToLiveSpecification: { AttributeName: LEDGER_TABLE.ttlAttribute, Enabled: true },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      SSESpecification: { SSEEnabled: true },
      GlobalSecondaryIndexes: [{
        IndexName: LEDGER_TABLE.workspaceIndex.name,
        KeySchema: [
          { AttributeName: LEDGER_TABLE.workspaceIndex.partitionKey, KeyType: 'HASH' },
          { AttributeName: LEDGER_TABLE.workspaceIndex.sortKey, KeyType: 'RANGE' },
        ],
      }],
    });
    template.hasResource('AWS::DynamoDB::Table', { DeletionPolicy: 'Retain' });
  });

  it('diff bucket: no public access, encrypted, TLS-only, objects expire, retained', () => {
    template.hasResource('AWS::S3::Bucket', {
      DeletionPolicy: 'Retain',
      Properties: {
        PublicAccessBlockConfiguration: { BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true },
        BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
        LifecycleConfiguration: { Rules: Match.arrayWith([Match.objectLike({ ExpirationInDays: 30, Status: 'Enabled' })]) },
      },
    });
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
    });
    template.resourceCountIs('Custom::S3AutoDeleteObjects', 0);
  });
});

describe('alarms', () => {
  const topic = () => ({ Ref: logicalId(stack.alarmTopic) });

  it('every queue alarms on its oldest message, every DLQ on visible messages > 0 and on a message halfway to expiry, every function on errors and throttles', () => {
    for (const { spec, queue, worker } of stack.lanes) {
      const queueName = (q: { node: { defaultChild?: unknown } }) => [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [logicalId(q), 'QueueName'] } }];
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        MetricName: 'ApproximateAgeOfOldestMessage', Dimensions: queueName(queue.queue), Threshold: spec.worker.oldestMessageAlarmSeconds, AlarmActions: [topic()],
      });
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        MetricName: 'ApproximateNumberOfMessagesVisible', Dimensions: queueName(queue.deadLetterQueue as sqs.Queue), Threshold: 0,
        ComparisonOperator: 'GreaterThanThreshold', AlarmActions: [topic()],
      });
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        MetricName: 'ApproximateAgeOfOldestMessage', Dimensions: queueName(queue.deadLetterQueue as sqs.Queue), Threshold: (DLQ_RETENTION_DAYS * 86_400) / 2,
        ComparisonOperator: 'GreaterThanThreshold', AlarmActions: [topic()],
      });
      for (const metric of ['Errors', 'Throttles']) {
        template.hasResourceProperties('AWS::CloudWatch::Alarm', {
          MetricName: metric, Namespace: 'AWS/Lambda', Dimensions: [{ Name: 'FunctionName', Value: { Ref: logicalId(worker.function) } }], AlarmActions: [topic()],
        });
      }
    }
    template.resourceCountIs('AWS::CloudWatch::Alarm', stack.lanes.length * 5);
  });

  it('all alarm actions go to one encrypted topic, with the configured e-mail subscribed', () => {
    for (const [, alarm] of resources('AWS::CloudWatch::Alarm')) expect(alarm.Properties.AlarmActions).toEqual([topic()]);
    template.resourceCountIs('AWS::SNS::Topic', 1);
    template.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: Match.anyValue() });
    template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com', TopicArn: topic() });
    template.hasResourceProperties('AWS::KMS::Key', {
      EnableKeyRotation: true,
      KeyPolicy: { Statement: Match.arrayWith([Match.objectLike({ Principal: { Service: 'cloudwatch.amazonaws.com' } })]) },
    });
  });

  it('no e-mail subscription without alarmEmail', () => {
    synth().template.resourceCountIs('AWS::SNS::Subscription', 0);
  });
});

describe('test runner', () => {
  it('is a no-source project with its own role and log group that fetches the pinned commit with the git credentials secret', () => {
    const [[, project]] = resources('AWS::CodeBuild::Project') as [[string, Resource]];
    expect(project.Properties).toMatchObject({
      Source: { Type: 'NO_SOURCE' },
      TimeoutInMinutes: 60,
      LogsConfig: { CloudWatchLogs: { GroupName: { Ref: logicalId(stack.testRunner.logGroup) }, Status: 'ENABLED' } },
      ServiceRole: { 'Fn::GetAtt': [logicalId(stack.testRunner.project.role as never), 'Arn'] },
      Environment: { PrivilegedMode: false },
    });
    const buildSpec = JSON.stringify(project.Properties.Source.BuildSpec);
    expect(buildSpec).toContain('secrets-manager');
    for (const name of Object.values(TEST_BUILD_ENV)) expect(buildSpec).toContain(`$${name}`);
    expect(buildSpec).toContain('git fetch');
    expect(buildSpec).toContain('GitCredentials8CA32E0F');
  });
});

it('the dashboard shows every queue, DLQ and function and the job outcome metrics', () => {
  const [[, dashboard]] = resources('AWS::CloudWatch::Dashboard') as [[string, Resource]];
  const body = JSON.stringify(dashboard.Properties.DashboardBody);
  for (const { queue, worker } of stack.lanes) {
    for (const construct of [queue.queue, queue.deadLetterQueue as sqs.Queue, worker.function]) expect(body).toContain(logicalId(construct));
  }
  for (const metric of Object.values(JOB_METRICS)) expect(body).toContain(`MetricName=\\\\\\"${metric}\\\\\\"`);
  expect(body).toContain(`Namespace=\\\\\\"${METRICS_NAMESPACE}\\\\\\"`);
});

it('outputs every queue and DLQ URL and the shared resources under stable keys', () => {
  const outputs = Object.keys(template.toJSON().Outputs);
  const expected = [
    ...queueTopology().flatMap((q) => [queueUrlOutputKey(q.name), dlqUrlOutputKey(q.name)]),
    ...Object.values(STACK_OUTPUTS),
  ];
  expect(outputs.sort()).toEqual(expected.sort());
  expect(outputs).toEqual(expect.arrayContaining(['QueueUrlAgentJobs', 'DlqUrlAgentJobs', 'QueueUrlRunTests', 'DlqUrlOpenPr']));
});

describe('environments', () => {
  it('dev and prod synthesize side by side in one app with no physical name in common', () => {
    const twoEnvs = newApp();
    const [devStack, prodStack] = [addStack(twoEnvs, 'dev'), addStack(twoEnvs, 'prod')];
    const [dev, prod] = [Template.fromStack(devStack), Template.fromStack(prodStack)];
    const NAME_KEYS = /^(Name|QueueName|TableName|BucketName|FunctionName|RoleName|TopicName|LogGroupName|DashboardName|AlarmName|ProjectName)$/;
    const names = (t: Template): string[] =>
      Object.values(t.toJSON().Resources as Record<string, Resource>).flatMap((r) =>
        Object.entries(r.Properties ?? {}).filter(([k, v]) => NAME_KEYS.test(k) && typeof v === 'string').map(([, v]) => v as string));
    expect(names(dev).filter((n) => names(prod).includes(n))).toEqual([]);
    expect(twoEnvs.synth().stacks.map((s) => s.stackName).sort()).toEqual(['AgentJobs-dev', 'AgentJobs-prod']);
  });

  it('imports configured secrets by ARN instead of creating them, and applies the configured API URL and lease', () => {
    const git = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:agent-jobs/git-AbCdEf';
    const gh = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:agent-jobs/github-GhIjKl';
    const { template: t } = synth({ gitCredentialsSecretArn: git, githubTokenSecretArn: gh, githubApiUrl: 'https://ghe.example.com/api/v3', leaseSeconds: 300 }, 'prod');
    t.resourceCountIs('AWS::SecretsManager::Secret', 0);
    t.hasResourceProperties('AWS::Lambda::Function', { Environment: { Variables: Match.objectLike({ [ENV.githubTokenSecretArn]: gh, [ENV.githubApiUrl]: 'https://ghe.example.com/api/v3', [ENV.leaseSeconds]: '300' }) } });
    t.hasResourceProperties('AWS::IAM::Policy', { PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Action: ['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue'], Resource: git })]) } });
  });
});

describe('cdk-nag AwsSolutions checks', () => {
  it('leave no unacknowledged finding', () => {
    expect(nagFindings(app)).toEqual([]);
  });

  it('do report findings in this harness (so the check above can fail)', () => {
    const bare = newApp();
    new sqs.Queue(new Stack(bare, 'Bare'), 'Queue', { encryption: sqs.QueueEncryption.UNENCRYPTED });
    bare.synth();
    expect(nagFindings(bare)).toEqual(expect.arrayContaining([expect.stringMatching(/^AwsSolutions-SQS3 at Bare\/Queue/), expect.stringMatching(/^AwsSolutions-SQS4 at Bare\/Queue/)]));
  });
});
