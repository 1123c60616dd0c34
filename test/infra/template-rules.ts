/**
 * The platform's infrastructure rules, each checked on a synthesized template, and each paired
 * with the ways a template can break it. stack.test.ts runs every rule on the real template and
 * then on a copy broken by each of its mutations, where it must fail: a rule that cannot fail
 * proves nothing.
 *
 * Rules read the template JSON only (template.ts), never the constructs, so they find the FIFO
 * queue by its properties and a role by its description, as a reviewer reading the template would.
 */
import { DLQ_AGE_ALARM_MARGIN_DAYS } from '../../lib/constructs/queue-with-dlq';
import { LAMBDA_NODE_MAJOR } from '../../lib/constructs/worker';
import { placeholderValue, type SecretShape } from '../../lib/secrets';
import { BUILD_RECONCILER, COMMAND_JOB_TYPES, allWorkers } from '../../contract/job-types';
import { ENV, JOB_METRICS, MAX_MESSAGE_BYTES } from '../../contract/runtime-env';
import {
  BUILD_RECONCILER_LOG_GROUP_OUTPUT,
  STACK_OUTPUTS,
  dlqUrlOutputKey,
  logGroupOutputKey,
  queueUrlOutputKey,
} from '../../contract/stack-outputs';
import { LEDGER_TABLE, VISIBILITY_TIMEOUT_FACTOR, platformQueues, queueTopology } from '../../contract/topology';
import {
  asArray,
  baseName,
  render,
  resolve,
  resourcesOf,
  targetOf,
  type CfnResource,
  type TemplateJson,
} from './template';

export interface TemplateRule {
  readonly rule: string;
  /** Throws (a failed expect) when `t` breaks the rule. */
  readonly check: (t: TemplateJson) => void;
  /** Each breaks the rule on a copy of a template that holds it. */
  readonly mutations: Readonly<Record<string, (t: TemplateJson) => void>>;
}

// ---- locating things ------------------------------------------------------------------------

const props = (r: CfnResource): Record<string, any> => r.Properties ?? {};
const queues = (t: TemplateJson) => resourcesOf(t, 'AWS::SQS::Queue');
/** Queues something redrives to. */
const dlqIds = (t: TemplateJson): Set<string> =>
  new Set(
    queues(t).flatMap(([, q]) => {
      const target = targetOf(props(q)['RedrivePolicy']?.deadLetterTargetArn);
      return target ? [target] : [];
    }),
  );
const fifoQueue = (t: TemplateJson): CfnResource => {
  const found = queues(t).filter(([, q]) => props(q)['FifoQueue'] === true && props(q)['RedrivePolicy']);
  expect(found).toHaveLength(1);
  return found[0]![1];
};
const stageQueue = (t: TemplateJson): CfnResource =>
  queues(t).find(([, q]) => !props(q)['FifoQueue'] && props(q)['RedrivePolicy'])![1];
/** The queue the build-events rule targets (found from the rule, by its pattern's source). */
const buildEventsRule = (t: TemplateJson): CfnResource => {
  const found = resourcesOf(t, 'AWS::Events::Rule').filter(([, r]) =>
    asArray(props(r)['EventPattern']?.source).includes('aws.codebuild'),
  );
  expect(found).toHaveLength(1);
  return found[0]![1];
};
const reconcilerSchedule = (t: TemplateJson): CfnResource => {
  const found = resourcesOf(t, 'AWS::Events::Rule').filter(([, r]) => props(r)['ScheduleExpression'] !== undefined);
  expect(found).toHaveLength(1);
  return found[0]![1];
};
/** Every function: one per queue-fed worker, and the scheduled build reconciler. */
const FUNCTIONS = allWorkers().length + 1;
const standardDlqId = (t: TemplateJson): string =>
  queues(t).find(([id, q]) => !props(q)['FifoQueue'] && dlqIds(t).has(id))![0];
/**
 * The age a dead letter of DLQ `id` may reach (ApproximateAgeOfOldestMessage counts from the move)
 * with DLQ_AGE_ALARM_MARGIN_DAYS left: SQS deletes a FIFO one its retention after the move, a
 * standard one its retention after the first send to the queue, whose retention then comes off.
 */
const dlqAgeThreshold = (t: TemplateJson, id: string): number => {
  const seconds = (name: string) => Number(props(t.Resources[name]!)['MessageRetentionPeriod']);
  const margin = DLQ_AGE_ALARM_MARGIN_DAYS * 86_400;
  if (props(t.Resources[id]!)['FifoQueue'] === true) return seconds(id) - margin;
  const sources = queues(t).filter(([, q]) => targetOf(props(q)['RedrivePolicy']?.deadLetterTargetArn) === id);
  return seconds(id) - Math.max(...sources.map(([source]) => seconds(source))) - margin;
};
const fifoDlqId = (t: TemplateJson): string =>
  queues(t).find(([id, q]) => props(q)['FifoQueue'] && dlqIds(t).has(id))![0];
const topicId = (t: TemplateJson): string => {
  const topics = resourcesOf(t, 'AWS::SNS::Topic');
  expect(topics).toHaveLength(1);
  return topics[0]![0];
};
const single = (t: TemplateJson, type: string): CfnResource => {
  const found = resourcesOf(t, type);
  expect(found).toHaveLength(1);
  return found[0]![1];
};
/** `sequencer/Worker`, `TestRunner`: a role's construct path below the stack, from its description. */
const roleKey = (role: CfnResource): string | undefined =>
  /^(?:Execution|Service) role of [^/]+\/(.+)$/.exec(String(props(role)['Description']))?.[1];
const policyOfRole = (t: TemplateJson, key: string): CfnResource => {
  const roleId = resourcesOf(t, 'AWS::IAM::Role').find(([, r]) => roleKey(r) === key)?.[0];
  const policy = resourcesOf(t, 'AWS::IAM::Policy').find(([, p]) =>
    asArray(props(p)['Roles']).some((ref) => targetOf(ref) === roleId),
  );
  if (!policy) throw new Error(`no policy for the role ${key}`);
  return policy[1];
};
const statementsOf = (policy: CfnResource): Record<string, any>[] => props(policy)['PolicyDocument'].Statement;
const alarmsOn = (t: TemplateJson, metric: string, dimension: string, id: string) =>
  resourcesOf(t, 'AWS::CloudWatch::Alarm').filter(
    ([, a]) =>
      props(a)['MetricName'] === metric &&
      asArray(props(a)['Dimensions']).some((d: any) => d.Name === dimension && targetOf(d.Value) === id),
  );
const cloudWatchStatement = (statements: Record<string, any>[]) =>
  statements.find((s) => s.Principal?.Service === 'cloudwatch.amazonaws.com');
const topicPolicyStatements = (t: TemplateJson): Record<string, any>[] => {
  const topic = topicId(t);
  const policy = resourcesOf(t, 'AWS::SNS::TopicPolicy').find(([, p]) =>
    asArray(props(p)['Topics']).some((ref) => targetOf(ref) === topic),
  );
  return policy ? props(policy[1])['PolicyDocument'].Statement : [];
};
const keyStatements = (t: TemplateJson): Record<string, any>[] => {
  const [, key] = resolve(t, props(t.Resources[topicId(t)]!)['KmsMasterKeyId']);
  return props(key)['KeyPolicy'].Statement;
};

/** Alarms of this account and region, and only them, may use the topic and its key. */
const FROM_THIS_ACCOUNTS_ALARMS = {
  account: '${AWS::AccountId}',
  arn: 'arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:*',
};
function expectFromThisAccountsAlarms(statement: Record<string, any> | undefined): void {
  expect(statement).toBeDefined();
  expect(statement!['Effect']).toBe('Allow');
  expect(render(statement!['Condition']?.StringEquals?.['aws:SourceAccount'])).toBe(FROM_THIS_ACCOUNTS_ALARMS.account);
  expect(render(statement!['Condition']?.ArnLike?.['aws:SourceArn'])).toBe(FROM_THIS_ACCOUNTS_ALARMS.arn);
}

// ---- least privilege --------------------------------------------------------------------------

interface Grant {
  readonly actions: readonly string[];
  /** Resources by base name (template.ts render): `LedgerTable`, `DiffBucket/*`, `*`. */
  readonly resources: readonly string[];
  readonly reason: string;
}

/** Logical-id prefix of a lane: CDK keeps only the alphanumerics of `run_tests`. */
const laneId = (consumer: string): string => consumer.replace(/[^A-Za-z0-9]/g, '');

function everyWorker(consumer: string): Grant[] {
  const lane = laneId(consumer);
  return [
    {
      actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
      resources: [`${lane}WorkerLogGroup`],
      reason: 'writes to its own log group only',
    },
    {
      actions: ['xray:PutTelemetryRecords', 'xray:PutTraceSegments'],
      resources: ['*'],
      reason: 'active tracing; X-Ray has no resource-level permissions',
    },
    {
      actions: ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'],
      resources: [`${lane}Queue`],
      reason: 'the event source mapping polls its queue',
    },
    {
      actions: ['sqs:ChangeMessageVisibility', 'sqs:GetQueueUrl'],
      resources: [`${lane}Queue`],
      reason: "heartbeats and back-off set a message's visibility; the URL comes from the record's queue ARN",
    },
    {
      actions: ['sqs:SendMessage'],
      resources: [`${lane}QueueDlq`],
      reason: 'the handler moves a permanent failure to its DLQ',
    },
    {
      actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
      resources: ['LedgerTable'],
      reason: 'claims and completions are conditional updates; consistent reads after a failed condition',
    },
    {
      actions: ['dynamodb:Query'],
      resources: [`LedgerTable/index/${LEDGER_TABLE.workspaceIndex.name}`],
      reason: "a workspace's jobs in order",
    },
    { actions: ['events:PutEvents'], resources: ['EventBus'], reason: 'job outcome events' },
  ];
}

/** A stage's function: a worker's grants, and sending a waiting job back on its own queue. */
function stageWorker(consumer: string): Grant[] {
  return [
    ...everyWorker(consumer),
    {
      actions: ['sqs:SendMessage'],
      resources: [`${laneId(consumer)}Queue`],
      reason:
        'a job waiting for a limit (GitHub, the build quota) goes back on its queue as a fresh copy, delayed by the wait',
    },
  ];
}

/** The checkout secrets (src/adapters/build-checkout.ts), as the synthesized dev stack names them. */
const CHECKOUT_SECRETS =
  'arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:agent-jobs/AgentJobs-dev/checkout/*';

/** The DLQ of every command stage: where the completion path copies a failed build's job. */
const commandStageDlqs = COMMAND_JOB_TYPES.map((type) => `${laneId(type)}QueueDlq`);

/** Every permission of every role in the stack, with its reason. Keys: the role's construct path below the stack. */
export const ALLOW_LIST: Readonly<Record<string, readonly Grant[]>> = {
  'sequencer/Worker': [
    ...everyWorker('sequencer'),
    {
      actions: ['sqs:SendMessage'],
      resources: queueTopology()
        .filter((q) => q.role === 'stage')
        .map((q) => `${laneId(q.consumer)}Queue`),
      reason: 'forwards pinned staged jobs to their stage queue',
    },
    {
      actions: ['secretsmanager:GetSecretValue'],
      resources: ['GitCredentials'],
      reason: 'the push credential: the sequencer is the only writer of a workspace',
    },
    {
      actions: ['s3:GetObject'],
      resources: ['DiffBucket/*'],
      reason: 'claim-checked diffs, any key of the one bucket',
    },
    {
      actions: ['s3:ListBucket'],
      resources: ['DiffBucket'],
      reason: 'a missing diff answers NoSuchKey, not AccessDenied',
    },
  ],
  // Every command stage's function (run_tests, run_lint): the same grants, from its declaration.
  ...Object.fromEntries(
    COMMAND_JOB_TYPES.map((type) => [
      `${type}/Worker`,
      [
        ...stageWorker(type),
        {
          actions: ['codebuild:StartBuild'],
          resources: ['TestRunnerProject'],
          reason: 'starts the build of a run (idempotency token per job and run); nothing polls it',
        },
        {
          actions: ['codebuild:ListBuildsForProject', 'codebuild:BatchGetBuilds'],
          resources: ['TestRunnerProject'],
          reason: 'after a crash between StartBuild and recording its id: one search of the 100 newest builds',
        },
        {
          actions: ['secretsmanager:GetSecretValue'],
          resources: ['GitReadCredentials'],
          reason:
            "the read-only credential (or the GitHub App that mints a build's read-only token), which the build itself never reads",
        },
        {
          actions: [
            'secretsmanager:CreateSecret',
            'secretsmanager:GetSecretValue',
            'secretsmanager:PutSecretValue',
            'secretsmanager:DescribeSecret',
            'secretsmanager:RestoreSecret',
          ],
          resources: [CHECKOUT_SECRETS],
          reason:
            "reads the checkout secret of the build's repository, under the stack's prefix (all a build may read), writes it only when its current version no longer serves, and restores it when it is scheduled for deletion",
        },
      ],
    ]),
  ),
  'build_events/Worker': [
    ...everyWorker('build_events'),
    {
      actions: ['sqs:SendMessage'],
      resources: commandStageDlqs,
      reason: "a failed build's job: its message copy on its stage's DLQ, as for any failed job",
    },
  ],
  'build-reconciler/Worker': [
    {
      actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
      resources: ['buildreconcilerWorkerLogGroup'],
      reason: 'writes to its own log group only',
    },
    {
      actions: ['xray:PutTelemetryRecords', 'xray:PutTraceSegments'],
      resources: ['*'],
      reason: 'active tracing; X-Ray has no resource-level permissions',
    },
    {
      actions: ['dynamodb:Query'],
      resources: [`LedgerTable/index/${LEDGER_TABLE.dueIndex.name}`],
      reason: 'lists the command-stage jobs due (sparse index), nothing else',
    },
    {
      actions: ['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:UpdateItem'],
      resources: ['LedgerTable'],
      reason:
        'reads back the jobs the due index lists (consistent: the index lags), records a verdict fenced on the build id, marks it reported',
    },
    {
      actions: ['codebuild:BatchGetBuilds'],
      resources: ['TestRunnerProject'],
      reason: 'the state of the due builds: one request of at most 100 per run',
    },
    {
      actions: ['codebuild:StopBuild'],
      resources: ['TestRunnerProject'],
      reason: 'stops the build of a job an operator cancelled while it ran, builds of the one project only',
    },
    { actions: ['events:PutEvents'], resources: ['EventBus'], reason: 'the outcome event of a job it completes' },
    {
      actions: ['sqs:SendMessage'],
      resources: commandStageDlqs,
      reason: "a failed build's job: its message copy on its stage's DLQ",
    },
  ],
  'open_pr/Worker': [
    ...stageWorker('open_pr'),
    { actions: ['secretsmanager:GetSecretValue'], resources: ['GithubToken'], reason: 'opens pull requests on GitHub' },
  ],
  TestRunner: [
    {
      actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
      resources: ['TestRunnerLogGroup'],
      reason: "the build's log group only (not CodeBuild's default one)",
    },
    {
      actions: ['secretsmanager:GetSecretValue'],
      resources: [CHECKOUT_SECRETS],
      reason: "fetches the pinned commit with its repository's checkout secret, never an operator's secret",
    },
  ],
};

/** `role action resource` of every statement of every role's policies. */
function grantedPairs(t: TemplateJson): string[] {
  const roles = new Map(
    resourcesOf(t, 'AWS::IAM::Role').map(([id, r]) => [id, roleKey(r) ?? `undescribed role ${id}`]),
  );
  return resourcesOf(t, 'AWS::IAM::Policy').flatMap(([, policy]) => {
    const keys = asArray(props(policy)['Roles']).map(
      (ref) => roles.get(targetOf(ref) ?? '') ?? `not a role: ${render(ref)}`,
    );
    return keys.flatMap((key) =>
      statementsOf(policy).flatMap((s) => {
        expect(s['Effect']).toBe('Allow');
        return asArray<string>(s['Action']).flatMap((action) =>
          asArray(s['Resource']).map((resource) => `${key} ${action} ${render(resource)}`),
        );
      }),
    );
  });
}

function allowedPairs(): string[] {
  return Object.entries(ALLOW_LIST).flatMap(([key, grants]) =>
    grants.flatMap((g) => g.actions.flatMap((action) => g.resources.map((resource) => `${key} ${action} ${resource}`))),
  );
}

// ---- the rules --------------------------------------------------------------------------------

const FIFO_HIGH_THROUGHPUT = {
  FifoQueue: true,
  DeduplicationScope: 'messageGroup',
  FifoThroughputLimit: 'perMessageGroupId',
  ContentBasedDeduplication: false,
};

export const TEMPLATE_RULES: readonly TemplateRule[] = [
  {
    rule: 'the FIFO queue and its DLQ are FIFO in high-throughput mode, and the queue redrives to that FIFO DLQ',
    check: (t) => {
      const queue = fifoQueue(t);
      const [, dlq] = resolve(t, props(queue)['RedrivePolicy'].deadLetterTargetArn);
      for (const q of [queue, dlq]) expect(props(q)).toMatchObject(FIFO_HIGH_THROUGHPUT);
    },
    mutations: {
      'the FIFO queue redrives to a standard DLQ': (t) => {
        props(fifoQueue(t))['RedrivePolicy'].deadLetterTargetArn = { 'Fn::GetAtt': [standardDlqId(t), 'Arn'] };
      },
      'the FIFO DLQ is throttled per queue': (t) => {
        props(t.Resources[fifoDlqId(t)]!)['FifoThroughputLimit'] = 'perQueue';
      },
      'content-based deduplication replaces the explicit ids': (t) => {
        props(fifoQueue(t))['ContentBasedDeduplication'] = true;
      },
    },
  },
  {
    rule: 'every queue and DLQ: explicit 1 MiB maximum size, SQS-managed SSE, an HTTPS-only queue policy',
    check: (t) => {
      const policies = resourcesOf(t, 'AWS::SQS::QueuePolicy');
      expect(queues(t)).toHaveLength(platformQueues().length * 2);
      for (const [id, queue] of queues(t)) {
        expect(props(queue)).toMatchObject({ MaximumMessageSize: MAX_MESSAGE_BYTES, SqsManagedSseEnabled: true });
        const statements = policies
          .filter(([, p]) => asArray(props(p)['Queues']).some((ref) => targetOf(ref) === id))
          .flatMap(([, p]) => statementsOf(p));
        expect(statements).toContainEqual(
          expect.objectContaining({
            Effect: 'Deny',
            Action: 'sqs:*',
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
          }),
        );
      }
    },
    mutations: {
      'a DLQ accepts plain HTTP': (t) => {
        const dlq = fifoDlqId(t);
        const [, policy] = resourcesOf(t, 'AWS::SQS::QueuePolicy').find(([, p]) =>
          asArray(props(p)['Queues']).some((ref) => targetOf(ref) === dlq),
        )!;
        props(policy)['PolicyDocument'].Statement = [];
      },
      "a stage queue falls back to CloudFormation's default message size": (t) => {
        delete props(stageQueue(t))['MaximumMessageSize'];
      },
    },
  },
  {
    rule: 'every consumed queue: visibility >= 6 x its function timeout, told to the function, maxReceiveCount >= 5, a DLQ of its own kind',
    check: (t) => {
      const mappings = resourcesOf(t, 'AWS::Lambda::EventSourceMapping');
      expect(mappings).toHaveLength(allWorkers().length);
      for (const [, mapping] of mappings) {
        const [, queue] = resolve(t, props(mapping)['EventSourceArn']);
        const [, fn] = resolve(t, props(mapping)['FunctionName']);
        const visibility = props(queue)['VisibilityTimeout'];
        expect(visibility).toBeGreaterThanOrEqual(VISIBILITY_TIMEOUT_FACTOR * props(fn)['Timeout']);
        expect(props(fn)['Environment'].Variables[ENV.visibilityTimeoutSeconds]).toBe(String(visibility));
        expect(props(queue)['RedrivePolicy'].maxReceiveCount).toBeGreaterThanOrEqual(5);
        const [, dlq] = resolve(t, props(queue)['RedrivePolicy'].deadLetterTargetArn);
        expect(Boolean(props(dlq)['FifoQueue'])).toBe(Boolean(props(queue)['FifoQueue']));
      }
    },
    mutations: {
      "a stage queue's visibility is only its function's timeout": (t) => {
        props(stageQueue(t))['VisibilityTimeout'] = 60;
      },
      'a queue moves a message to its DLQ after 3 receives': (t) => {
        props(fifoQueue(t))['RedrivePolicy'].maxReceiveCount = 3;
      },
      'a stage queue redrives to the FIFO DLQ': (t) => {
        props(stageQueue(t))['RedrivePolicy'].deadLetterTargetArn = { 'Fn::GetAtt': [fifoDlqId(t), 'Arn'] };
      },
      "a function is told another visibility than its queue's (e.g. the catalog's, under an override)": (t) => {
        const variables = props(resourcesOf(t, 'AWS::Lambda::Function')[0]![1])['Environment'].Variables;
        variables[ENV.visibilityTimeoutSeconds] = String(Number(variables[ENV.visibilityTimeoutSeconds]) / 2);
      },
    },
  },
  {
    rule: 'every event source mapping: partial batch responses, explicit batch size (<= 10) and MaximumConcurrency, no batching window',
    check: (t) => {
      for (const [, mapping] of resourcesOf(t, 'AWS::Lambda::EventSourceMapping')) {
        const p = props(mapping);
        expect(p['FunctionResponseTypes']).toEqual(['ReportBatchItemFailures']);
        expect(p['BatchSize']).toBeGreaterThanOrEqual(1);
        expect(p['BatchSize']).toBeLessThanOrEqual(10);
        expect(p['ScalingConfig']?.MaximumConcurrency).toEqual(expect.any(Number));
        expect(p['MaximumBatchingWindowInSeconds']).toBeUndefined();
        expect(p['MetricsConfig']).toEqual({ Metrics: ['EventCount'] });
      }
    },
    mutations: {
      'a mapping waits for a batching window': (t) => {
        props(resourcesOf(t, 'AWS::Lambda::EventSourceMapping')[0]![1])['MaximumBatchingWindowInSeconds'] = 5;
      },
      'a mapping retries whole batches': (t) => {
        delete props(resourcesOf(t, 'AWS::Lambda::EventSourceMapping')[1]![1])['FunctionResponseTypes'];
      },
      'a mapping has no maximum concurrency': (t) => {
        delete props(resourcesOf(t, 'AWS::Lambda::EventSourceMapping')[2]![1])['ScalingConfig'];
      },
    },
  },
  {
    rule: 'alarms: every queue on its oldest message, every DLQ on depth > 0 and age, every function on errors and throttles, all to the one topic',
    check: (t) => {
      const topic = topicId(t);
      const dlqs = dlqIds(t);
      for (const [id] of queues(t)) {
        expect(alarmsOn(t, 'ApproximateAgeOfOldestMessage', 'QueueName', id)).toHaveLength(1);
        if (!dlqs.has(id)) continue;
        const depth = alarmsOn(t, 'ApproximateNumberOfMessagesVisible', 'QueueName', id);
        expect(depth.map(([, a]) => [props(a)['Threshold'], props(a)['ComparisonOperator']])).toEqual([
          [0, 'GreaterThanThreshold'],
        ]);
        expect(props(alarmsOn(t, 'ApproximateAgeOfOldestMessage', 'QueueName', id)[0]![1])['Threshold']).toBe(
          dlqAgeThreshold(t, id),
        );
      }
      for (const [id] of resourcesOf(t, 'AWS::Lambda::Function')) {
        for (const metric of ['Errors', 'Throttles']) expect(alarmsOn(t, metric, 'FunctionName', id)).toHaveLength(1);
      }
      for (const [, alarm] of resourcesOf(t, 'AWS::CloudWatch::Alarm'))
        expect(props(alarm)['AlarmActions']).toEqual([{ Ref: topic }]);
    },
    mutations: {
      "the FIFO DLQ's age alarm fires at half its retention, as a standard DLQ's": (t) => {
        const [, alarm] = alarmsOn(t, 'ApproximateAgeOfOldestMessage', 'QueueName', fifoDlqId(t))[0]!;
        props(alarm)['Threshold'] = 7 * 86_400;
      },
      'a DLQ has no depth alarm': (t) => {
        const [id] = alarmsOn(t, 'ApproximateNumberOfMessagesVisible', 'QueueName', fifoDlqId(t))[0]!;
        delete t.Resources[id];
      },
      'an alarm notifies another topic': (t) => {
        props(resourcesOf(t, 'AWS::CloudWatch::Alarm')[0]![1])['AlarmActions'] = [
          'arn:aws:sns:eu-west-1:123456789012:elsewhere',
        ];
      },
      'a function has no throttles alarm': (t) => {
        const [fn] = resourcesOf(t, 'AWS::Lambda::Function')[0]!;
        delete t.Resources[alarmsOn(t, 'Throttles', 'FunctionName', fn)[0]![0]];
      },
    },
  },
  {
    rule: "alarm topic: a rotating customer-managed key; CloudWatch may publish and use the key for this account's alarms only; TLS only",
    check: (t) => {
      const topic = t.Resources[topicId(t)]!;
      const [, key] = resolve(t, props(topic)['KmsMasterKeyId']);
      expect(props(key)['EnableKeyRotation']).toBe(true);
      const publish = cloudWatchStatement(topicPolicyStatements(t));
      expectFromThisAccountsAlarms(publish);
      expect(publish!['Action']).toBe('sns:Publish');
      expect(targetOf(publish!['Resource'])).toBe(topicId(t));
      const useKey = cloudWatchStatement(keyStatements(t));
      expectFromThisAccountsAlarms(useKey);
      expect([...asArray(useKey!['Action'])].sort()).toEqual(['kms:Decrypt', 'kms:GenerateDataKey*']);
      expect(topicPolicyStatements(t)).toContainEqual(
        expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
      );
    },
    mutations: {
      "the topic policy has no CloudWatch statement (SNS's default policy is replaced)": (t) => {
        const statements = topicPolicyStatements(t);
        statements.splice(statements.indexOf(cloudWatchStatement(statements)!), 1);
      },
      'CloudWatch may publish on behalf of any account': (t) => {
        delete cloudWatchStatement(topicPolicyStatements(t))!['Condition'];
      },
      "the key lets CloudWatch in for anyone's alarms": (t) => {
        delete cloudWatchStatement(keyStatements(t))!['Condition'].ArnLike;
      },
      'the key has no statement for CloudWatch': (t) => {
        const statements = keyStatements(t);
        statements.splice(statements.indexOf(cloudWatchStatement(statements)!), 1);
      },
    },
  },
  {
    rule: 'ledger table: on-demand, TTL, point-in-time recovery, encrypted, deletion protection, retained',
    check: (t) => {
      const [[, table]] = resourcesOf(t, 'AWS::DynamoDB::Table') as [[string, CfnResource]];
      expect(resourcesOf(t, 'AWS::DynamoDB::Table')).toHaveLength(1);
      expect(props(table)).toMatchObject({
        BillingMode: 'PAY_PER_REQUEST',
        TimeToLiveSpecification: { AttributeName: LEDGER_TABLE.ttlAttribute, Enabled: true },
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        SSESpecification: { SSEEnabled: true },
        DeletionProtectionEnabled: true,
      });
      expect([table.DeletionPolicy, table.UpdateReplacePolicy]).toEqual(['Retain', 'Retain']);
    },
    mutations: {
      'deletion protection is off': (t) => {
        props(single(t, 'AWS::DynamoDB::Table'))['DeletionProtectionEnabled'] = false;
      },
      'the table is deleted with the stack': (t) => {
        single(t, 'AWS::DynamoDB::Table').DeletionPolicy = 'Delete';
      },
      'no point-in-time recovery': (t) => {
        delete props(single(t, 'AWS::DynamoDB::Table'))['PointInTimeRecoverySpecification'];
      },
    },
  },
  {
    rule: "ledger indexes: byWorkspace (a workspace's jobs in order), the sparse byList projecting only attributes that never change, and the sparse byDueTime (the build reconciler's)",
    check: (t) => {
      const keys = (index: { partitionKey: string; sortKey: string }) => [
        { AttributeName: index.partitionKey, KeyType: 'HASH' },
        { AttributeName: index.sortKey, KeyType: 'RANGE' },
      ];
      expect(props(single(t, 'AWS::DynamoDB::Table'))['GlobalSecondaryIndexes']).toEqual([
        expect.objectContaining({
          IndexName: LEDGER_TABLE.workspaceIndex.name,
          KeySchema: keys(LEDGER_TABLE.workspaceIndex),
        }),
        // Projecting anything that changes (status, lease) would write the index on every heartbeat.
        {
          IndexName: LEDGER_TABLE.listIndex.name,
          KeySchema: keys(LEDGER_TABLE.listIndex),
          Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...LEDGER_TABLE.listIndex.projected] },
        },
        // The reconciler completes a job from what it reads there (its stage message included).
        {
          IndexName: LEDGER_TABLE.dueIndex.name,
          KeySchema: keys(LEDGER_TABLE.dueIndex),
          Projection: { ProjectionType: 'ALL' },
        },
      ]);
    },
    mutations: {
      'the list index projects every attribute': (t) => {
        const indexes = props(single(t, 'AWS::DynamoDB::Table'))['GlobalSecondaryIndexes'] as { Projection: unknown }[];
        indexes[1]!.Projection = { ProjectionType: 'ALL' };
      },
      'the list index is missing': (t) => {
        (props(single(t, 'AWS::DynamoDB::Table'))['GlobalSecondaryIndexes'] as unknown[]).splice(1, 1);
      },
      'the due index is missing': (t) => {
        (props(single(t, 'AWS::DynamoDB::Table'))['GlobalSecondaryIndexes'] as unknown[]).pop();
      },
    },
  },
  {
    rule: 'what holds jobs, credentials or logs is retained when the stack is deleted (queues, DLQs, secrets, log groups, the diff bucket)',
    check: (t) => {
      for (const type of ['AWS::SQS::Queue', 'AWS::SecretsManager::Secret', 'AWS::Logs::LogGroup', 'AWS::S3::Bucket']) {
        for (const [id, r] of resourcesOf(t, type))
          expect({ id, policies: [r.DeletionPolicy, r.UpdateReplacePolicy] }).toEqual({
            id,
            policies: ['Retain', 'Retain'],
          });
      }
      expect(resourcesOf(t, 'AWS::SecretsManager::Secret')).not.toHaveLength(0);
    },
    mutations: {
      'a DLQ is deleted with the stack': (t) => {
        t.Resources[standardDlqId(t)]!.DeletionPolicy = 'Delete';
      },
      'a secret is deleted with the stack': (t) => {
        resourcesOf(t, 'AWS::SecretsManager::Secret')[0]![1].DeletionPolicy = 'Delete';
      },
    },
  },
  {
    rule: `every function: the Node.js ${LAMBDA_NODE_MAJOR} runtime, ARM64, active tracing, its own log group and role, no managed policy, no retry setting`,
    check: (t) => {
      const functions = resourcesOf(t, 'AWS::Lambda::Function');
      expect(functions).toHaveLength(FUNCTIONS);
      const roles = new Set<string>();
      for (const [, fn] of functions) {
        expect(props(fn)).toMatchObject({
          Runtime: `nodejs${LAMBDA_NODE_MAJOR}.x`,
          Architectures: ['arm64'],
          TracingConfig: { Mode: 'Active' },
        });
        const [, logGroup] = resolve(t, props(fn)['LoggingConfig']?.LogGroup);
        expect(logGroup).toMatchObject({ Type: 'AWS::Logs::LogGroup', Properties: { RetentionInDays: 30 } });
        roles.add(resolve(t, props(fn)['Role'])[0]);
      }
      expect(roles.size).toBe(functions.length);
      for (const [, role] of resourcesOf(t, 'AWS::IAM::Role'))
        expect([props(role)['ManagedPolicyArns'], props(role)['Policies']]).toEqual([undefined, undefined]);
      expect(resourcesOf(t, 'Custom::LogRetention')).toHaveLength(0);
      expect(resourcesOf(t, 'AWS::Lambda::EventInvokeConfig')).toHaveLength(0);
    },
    mutations: {
      'a function runs on an older runtime': (t) => {
        props(resourcesOf(t, 'AWS::Lambda::Function')[0]![1])['Runtime'] = 'nodejs20.x';
      },
      'two functions share a role': (t) => {
        const [[, a], [, b]] = resourcesOf(t, 'AWS::Lambda::Function') as [
          [string, CfnResource],
          [string, CfnResource],
        ];
        props(b)['Role'] = props(a)['Role'];
      },
      'a role carries AWSLambdaBasicExecutionRole': (t) => {
        props(resourcesOf(t, 'AWS::IAM::Role')[0]![1])['ManagedPolicyArns'] = [
          'arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole',
        ];
      },
    },
  },
  {
    rule: 'least privilege: every statement of every role (CodeBuild included) is on the allow-list, and every entry is used',
    check: (t) => {
      const granted = new Set(grantedPairs(t));
      const allowed = new Set(allowedPairs());
      expect({ notOnTheAllowList: [...granted].filter((p) => !allowed.has(p)).sort() }).toEqual({
        notOnTheAllowList: [],
      });
      expect({ allowedButNotGranted: [...allowed].filter((p) => !granted.has(p)).sort() }).toEqual({
        allowedButNotGranted: [],
      });
    },
    mutations: {
      'the sequencer may PutItem, which nothing calls': (t) => {
        statementsOf(policyOfRole(t, 'sequencer/Worker')).push({
          Effect: 'Allow',
          Action: 'dynamodb:PutItem',
          Resource: { 'Fn::GetAtt': [resourcesOf(t, 'AWS::DynamoDB::Table')[0]![0], 'Arn'] },
        });
      },
      'open_pr may DescribeSecret, which nothing calls': (t) => {
        const statement = statementsOf(policyOfRole(t, 'open_pr/Worker')).find(
          (s) => s['Action'] === 'secretsmanager:GetSecretValue',
        )!;
        statement['Action'] = ['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue'];
      },
      "the test build role may write CodeBuild's report groups": (t) => {
        statementsOf(policyOfRole(t, 'TestRunner')).push({
          Effect: 'Allow',
          Action: 'codebuild:CreateReport',
          Resource: 'arn:aws:codebuild:eu-west-1:123456789012:report-group/x-*',
        });
      },
      'test builds may read the push credential': (t) => {
        const statement = statementsOf(policyOfRole(t, 'TestRunner')).find(
          (s) => s['Action'] === 'secretsmanager:GetSecretValue',
        )!;
        statement['Resource'] = {
          Ref: resourcesOf(t, 'AWS::SecretsManager::Secret').find(([id]) => baseName(id) === 'GitCredentials')![0],
        };
      },
      'a function no longer publishes events (an allow-list entry nothing uses)': (t) => {
        const statements = statementsOf(policyOfRole(t, 'run_tests/Worker'));
        statements.splice(
          statements.findIndex((s) => s['Action'] === 'events:PutEvents'),
          1,
        );
      },
    },
  },
  {
    rule: 'created secrets hold the documented shape with the placeholder (never a generated value), and outputs name every secret',
    check: (t) => {
      const shapes: Record<string, SecretShape> = {
        GitCredentials: 'gitCredentials',
        GitReadCredentials: 'gitCredentials',
        GithubToken: 'token',
      };
      const secrets = resourcesOf(t, 'AWS::SecretsManager::Secret');
      expect(secrets.map(([id]) => baseName(id)).sort()).toEqual(Object.keys(shapes).sort());
      for (const [id, secret] of secrets) {
        expect(props(secret)['GenerateSecretString']).toBeUndefined();
        expect(props(secret)['SecretString']).toBe(placeholderValue(shapes[baseName(id)]!));
      }
      const outputs = t.Outputs ?? {};
      for (const key of [
        STACK_OUTPUTS.gitCredentialsSecretArn,
        STACK_OUTPUTS.gitReadCredentialsSecretArn,
        STACK_OUTPUTS.githubTokenSecretArn,
      ]) {
        expect(baseName(targetOf(outputs[key]?.Value) ?? `no output ${key}`)).toBe(
          baseName(key.replace(/SecretArn$/, '')),
        );
      }
    },
    mutations: {
      'a secret starts with a random generated string': (t) => {
        const [, secret] = resourcesOf(t, 'AWS::SecretsManager::Secret')[0]!;
        delete props(secret)['SecretString'];
        props(secret)['GenerateSecretString'] = {};
      },
      'no output names the read-only git credential': (t) => {
        delete t.Outputs![STACK_OUTPUTS.gitReadCredentialsSecretArn];
      },
    },
  },
  {
    rule: "test builds: no source, unprivileged, no operator's secret: only the checkout secrets the command stages write",
    check: (t) => {
      const project = single(t, 'AWS::CodeBuild::Project');
      expect(props(project)).toMatchObject({ Source: { Type: 'NO_SOURCE' }, Environment: { PrivilegedMode: false } });
      const buildSpec = JSON.stringify(props(project)['Source'].BuildSpec);
      const secretsInBuildSpec = buildSpec.match(/"Ref":"Git[A-Za-z]*Credentials[0-9A-F]{8}"|secrets-manager/g) ?? [];
      expect(secretsInBuildSpec).toEqual([]);
      // The build's role: the checkout secrets under the stack's prefix, and no other secret.
      const role = targetOf(props(project)['ServiceRole']) ?? '';
      const secretReads = resourcesOf(t, 'AWS::IAM::Policy')
        .filter(([, policy]) => asArray(props(policy)['Roles']).some((ref) => targetOf(ref) === role))
        .flatMap(([, policy]) =>
          statementsOf(policy)
            .filter((s) => asArray<string>(s['Action']).some((a) => a.startsWith('secretsmanager:')))
            .flatMap((s) => asArray(s['Resource']).map(render)),
        );
      expect(secretReads).toEqual([CHECKOUT_SECRETS]);
    },
    mutations: {
      'test builds fetch with the push credential': (t) => {
        const project = single(t, 'AWS::CodeBuild::Project');
        const push = resourcesOf(t, 'AWS::SecretsManager::Secret').find(
          ([id]) => baseName(id) === 'GitCredentials',
        )![0];
        props(project)['Source'].BuildSpec = JSON.stringify({
          ...JSON.parse(props(project)['Source'].BuildSpec),
          env: { 'secrets-manager': { GIT_PASSWORD: { Ref: push } } },
        });
      },
      "the build's role reads the read-only secret": (t) => {
        const project = single(t, 'AWS::CodeBuild::Project');
        const read = resourcesOf(t, 'AWS::SecretsManager::Secret').find(
          ([id]) => baseName(id) === 'GitReadCredentials',
        )![0];
        const [, policy] = resourcesOf(t, 'AWS::IAM::Policy').find(([, p]) =>
          asArray(props(p)['Roles']).some((ref) => targetOf(ref) === targetOf(props(project)['ServiceRole'])),
        )!;
        statementsOf(policy).push({
          Effect: 'Allow',
          Action: 'secretsmanager:GetSecretValue',
          Resource: { Ref: read },
        });
      },
      'test builds run privileged': (t) => {
        props(single(t, 'AWS::CodeBuild::Project'))['Environment'].PrivilegedMode = true;
      },
    },
  },
  {
    rule: 'diff bucket: no public access, encrypted, TLS only, objects expire, retained, never emptied by a custom resource',
    check: (t) => {
      const bucket = single(t, 'AWS::S3::Bucket');
      expect(props(bucket)).toMatchObject({
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        },
        BucketEncryption: {
          ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
        },
        LifecycleConfiguration: {
          Rules: expect.arrayContaining([expect.objectContaining({ ExpirationInDays: 30, Status: 'Enabled' })]),
        },
      });
      const policy = single(t, 'AWS::S3::BucketPolicy');
      expect(props(policy)['PolicyDocument'].Statement).toContainEqual(
        expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
      );
      expect(resourcesOf(t, 'Custom::S3AutoDeleteObjects')).toHaveLength(0);
    },
    mutations: {
      'objects never expire': (t) => {
        delete props(single(t, 'AWS::S3::Bucket'))['LifecycleConfiguration'];
      },
      'public bucket policies are allowed': (t) => {
        props(single(t, 'AWS::S3::Bucket'))['PublicAccessBlockConfiguration'].BlockPublicPolicy = false;
      },
    },
  },
  {
    rule: "outputs: every queue and DLQ URL, each function's log group, the shared resources and the secrets, under the stable keys the CLI reads",
    check: (t) => {
      const expected = [
        ...platformQueues().flatMap((q) => [
          queueUrlOutputKey(q.name),
          dlqUrlOutputKey(q.name),
          logGroupOutputKey(q.consumer),
        ]),
        BUILD_RECONCILER_LOG_GROUP_OUTPUT,
        ...Object.values(STACK_OUTPUTS),
      ];
      expect(Object.keys(t.Outputs ?? {}).sort()).toEqual(expected.sort());
    },
    mutations: {
      'the alarm topic is not an output': (t) => {
        delete t.Outputs![STACK_OUTPUTS.alarmTopicArn];
      },
    },
  },
  {
    rule: "builds end by event: a rule on the default bus sends the one project's ended builds to the build-events queue (its DLQ takes what cannot be delivered), and only that rule may send to them",
    check: (t) => {
      const rule = buildEventsRule(t);
      expect(props(rule)['EventBusName']).toBeUndefined();
      const project = resourcesOf(t, 'AWS::CodeBuild::Project')[0]![0];
      expect(props(rule)['EventPattern']).toEqual({
        source: ['aws.codebuild'],
        'detail-type': ['CodeBuild Build State Change'],
        detail: {
          'project-name': [{ Ref: project }],
          'build-status': ['SUCCEEDED', 'FAILED', 'FAULT', 'STOPPED', 'TIMED_OUT'],
        },
      });
      const [target] = asArray<Record<string, any>>(props(rule)['Targets']);
      const [queueId, queue] = resolve(t, target!['Arn']);
      expect(queue.Type).toBe('AWS::SQS::Queue');
      expect(targetOf(target!['DeadLetterConfig']?.Arn)).toBe(
        targetOf(props(queue)['RedrivePolicy'].deadLetterTargetArn),
      );
      const ruleId = resourcesOf(t, 'AWS::Events::Rule').find(([, r]) => r === rule)![0];
      for (const id of [queueId, targetOf(props(queue)['RedrivePolicy'].deadLetterTargetArn)!]) {
        const statements = resourcesOf(t, 'AWS::SQS::QueuePolicy')
          .filter(([, p]) => asArray(props(p)['Queues']).some((ref) => targetOf(ref) === id))
          .flatMap(([, p]) => statementsOf(p));
        const fromEvents = statements.filter((s) => s['Principal']?.Service === 'events.amazonaws.com');
        expect(fromEvents).toHaveLength(1);
        expect(targetOf(fromEvents[0]!['Condition']?.ArnEquals?.['aws:SourceArn'])).toBe(ruleId);
      }
      // Its consumer: partial batch responses like every other lane (the ESM rule covers the rest).
      const mapping = resourcesOf(t, 'AWS::Lambda::EventSourceMapping').find(
        ([, m]) => targetOf(props(m)['EventSourceArn']) === queueId,
      );
      expect(props(mapping![1])['FunctionResponseTypes']).toEqual(['ReportBatchItemFailures']);
    },
    mutations: {
      'the rule listens to every CodeBuild project of the account': (t) => {
        delete props(buildEventsRule(t))['EventPattern'].detail['project-name'];
      },
      'the rule also delivers in-progress states': (t) => {
        props(buildEventsRule(t))['EventPattern'].detail['build-status'].push('IN_PROGRESS');
      },
      'an event EventBridge cannot deliver is dropped': (t) => {
        delete asArray<Record<string, any>>(props(buildEventsRule(t))['Targets'])[0]!['DeadLetterConfig'];
      },
      'any rule may send to the build-events queue': (t) => {
        const [queueId] = resolve(t, asArray<Record<string, any>>(props(buildEventsRule(t))['Targets'])[0]!['Arn']);
        const [, policy] = resourcesOf(t, 'AWS::SQS::QueuePolicy').find(([, p]) =>
          asArray(props(p)['Queues']).some((ref) => targetOf(ref) === queueId),
        )!;
        delete statementsOf(policy).find((s) => s['Principal']?.Service === 'events.amazonaws.com')!['Condition'];
      },
    },
  },
  {
    rule: 'the build reconciler runs on a schedule (no retry: the next run does the same), and alarms when a job stays overdue or it stops running',
    check: (t) => {
      const schedule = reconcilerSchedule(t);
      expect(props(schedule)['ScheduleExpression']).toBe(`rate(${BUILD_RECONCILER.everyMinutes} minutes)`);
      const [target] = asArray<Record<string, any>>(props(schedule)['Targets']);
      expect(resolve(t, target!['Arn'])[1].Type).toBe('AWS::Lambda::Function');
      expect(target!['RetryPolicy']).toEqual({ MaximumRetryAttempts: 0 });
      const overdue = resourcesOf(t, 'AWS::CloudWatch::Alarm').filter(
        ([, a]) => props(a)['MetricName'] === JOB_METRICS.oldestOverdueBuild,
      );
      expect(overdue).toHaveLength(1);
      expect(props(overdue[0]![1])).toMatchObject({
        Threshold: BUILD_RECONCILER.overdueAlarmSeconds,
        TreatMissingData: 'breaching',
        Statistic: 'Maximum',
      });
    },
    mutations: {
      'a reconciler that stops running never alarms': (t) => {
        const [, alarm] = resourcesOf(t, 'AWS::CloudWatch::Alarm').find(
          ([, a]) => props(a)['MetricName'] === JOB_METRICS.oldestOverdueBuild,
        )!;
        props(alarm)['TreatMissingData'] = 'notBreaching';
      },
      'the reconciler runs once a day': (t) => {
        props(reconcilerSchedule(t))['ScheduleExpression'] = 'rate(1 day)';
      },
    },
  },
];
