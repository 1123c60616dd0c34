/**
 * The platform stack, synthesized once with an alarm e-mail set: every infrastructure rule
 * (template-rules.ts) holds on it and fails on a copy broken by each of the rule's mutations; then
 * what the rules cannot see from the template alone (environment variables the handlers read,
 * per-environment settings, cdk-nag), and one snapshot, made stable by asset-hash-serializer.ts,
 * so a review sees every change to the template.
 */
import { Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { BUILD_RECONCILER, COMMAND_JOB_TYPES, SEQUENCER } from '../../contract/job-types';
import { ENV, JOB_METRICS, METRICS_NAMESPACE, stageDlqUrlEnv, stageQueueUrlEnv } from '../../contract/runtime-env';
import { STACK_OUTPUTS } from '../../contract/stack-outputs';
import { DLQ_RETENTION_DAYS, QUEUE_RETENTION_DAYS, VISIBILITY_TIMEOUT_FACTOR } from '../../contract/topology';
import type { AgentJobsStack } from '../../lib/agent-jobs-stack';
import { expectedOutputKeys } from '../../tools/cli/doctor';
import { addStack, nagFindings, newApp, synth } from './helpers';
import { clone, resourcesOf, type TemplateJson } from './template';
import { TEMPLATE_RULES } from './template-rules';

let stack: AgentJobsStack;
let template: Template;
let json: TemplateJson;
let app: ReturnType<typeof newApp>;

beforeAll(() => {
  ({ app, stack, template } = synth({ alarmEmail: 'ops@example.com' }));
  json = template.toJSON() as TemplateJson;
});

const logicalId = (construct: { node: { defaultChild?: unknown } }): string =>
  stack.getLogicalId(construct.node.defaultChild as never);
const ref = (construct: { node: { defaultChild?: unknown } }) => ({ Ref: logicalId(construct) });
const lane = (consumer: string) => {
  const found = stack.lanes.find((l) => l.spec.consumer === consumer);
  if (!found) throw new Error(`no lane for ${consumer}`);
  return found;
};
const envOf = (t: TemplateJson, fnId: string): Record<string, unknown> =>
  t.Resources[fnId]!.Properties!['Environment'].Variables;

it('matches the snapshot (after a deliberate change, npm run test:snapshot updates it)', () => {
  expect(json).toMatchSnapshot();
});

describe.each(TEMPLATE_RULES)('rule: $rule', ({ check, mutations }) => {
  it('holds on the synthesized template', () => {
    check(json);
  });

  it.each(Object.entries(mutations))('fails when %s', (_name, mutate) => {
    const broken = clone(json);
    mutate(broken);
    expect(() => check(broken)).toThrow();
  });
});

describe('functions', () => {
  it('get the runtime environment from contract/runtime-env.ts: resources by name, secrets by ARN only', () => {
    const env = (consumer: string) => envOf(json, logicalId(lane(consumer).worker.function));
    expect(env('sequencer')).toMatchObject({
      [ENV.ledgerTable]: ref(stack.ledger.table),
      [ENV.eventBus]: ref(stack.eventBus),
      [ENV.dlqUrl]: ref(lane('sequencer').queue.deadLetterQueue as sqs.Queue),
      [ENV.diffBucket]: ref(stack.diffBucket),
      [ENV.gitCredentialsSecretArn]: ref(stack.secrets.gitCredentials.secret),
      [ENV.maxReceiveCount]: '5',
      [ENV.leaseSeconds]: '120',
      [ENV.ledgerRetentionDays]: '30',
      [ENV.visibilityTimeoutSeconds]: String(SEQUENCER.timeoutSeconds * VISIBILITY_TIMEOUT_FACTOR),
      [stageQueueUrlEnv('run_tests')]: ref(lane('run_tests').queue.queue),
      [stageQueueUrlEnv('open_pr')]: ref(lane('open_pr').queue.queue),
    });
    expect(env('run_tests')).toMatchObject({
      [ENV.testRunnerProject]: ref(stack.testRunner.project),
      [ENV.dlqUrl]: ref(lane('run_tests').queue.deadLetterQueue as sqs.Queue),
      [ENV.stageJobType]: 'run_tests',
      [ENV.buildTimeoutMinutes]: '60',
    });
    expect(env('build_events')).toMatchObject({
      [ENV.eventBus]: ref(stack.eventBus),
      [stageDlqUrlEnv('run_tests')]: ref(lane('run_tests').queue.deadLetterQueue as sqs.Queue),
    });
    expect(env('build_events')).not.toHaveProperty(ENV.testRunnerProject);
    const reconciler = envOf(json, logicalId(stack.buildReconciler!.worker.function));
    expect(reconciler).toMatchObject({
      [ENV.ledgerTable]: ref(stack.ledger.table),
      [ENV.eventBus]: ref(stack.eventBus),
      [ENV.testRunnerProject]: ref(stack.testRunner.project),
      [stageDlqUrlEnv('run_tests')]: ref(lane('run_tests').queue.deadLetterQueue as sqs.Queue),
    });
    expect(env('open_pr')).toMatchObject({
      [ENV.githubTokenSecretArn]: ref(stack.secrets.githubToken.secret),
      [ENV.githubApiUrl]: 'https://api.github.com',
    });
    expect(env('run_tests')).not.toHaveProperty(ENV.gitCredentialsSecretArn);
    expect(env('open_pr')).not.toHaveProperty(ENV.gitCredentialsSecretArn);
  });

  it('the push credential comes with the git hosts allow-list: none configured, none set (the sequencer refuses every host)', () => {
    const env = (s: typeof stack, t: TemplateJson, consumer: string) =>
      envOf(
        t,
        s.getLogicalId(s.lanes.find((l) => l.spec.consumer === consumer)!.worker.function.node.defaultChild as never),
      );
    expect(env(stack, json, 'sequencer')).not.toHaveProperty(ENV.gitHosts);
    const { stack: configured, template: t } = synth({ gitHosts: ['github.com', 'git.example.com:8443'] });
    expect(env(configured, t.toJSON() as TemplateJson, 'sequencer')).toMatchObject({
      [ENV.gitHosts]: 'github.com,git.example.com:8443',
    });
    for (const stage of ['run_tests', 'open_pr'])
      expect(env(configured, t.toJSON() as TemplateJson, stage)).not.toHaveProperty(ENV.gitHosts);
  });

  it("are told their queue's visibility as this environment deploys it, not the catalog's", () => {
    const { stack: overridden, template: t } = synth({ workers: { sequencer: { timeoutSeconds: 900 } } });
    const sequencer = overridden.lanes.find((l) => l.spec.consumer === 'sequencer')!;
    const id = (c: { node: { defaultChild?: unknown } }) => overridden.getLogicalId(c.node.defaultChild as never);
    const visibility = 900 * VISIBILITY_TIMEOUT_FACTOR;
    expect(t.toJSON().Resources[id(sequencer.queue.queue)].Properties.VisibilityTimeout).toBe(visibility);
    expect(envOf(t.toJSON() as TemplateJson, id(sequencer.worker.function))).toMatchObject({
      [ENV.visibilityTimeoutSeconds]: String(visibility),
    });
    expect(visibility).not.toBe(SEQUENCER.timeoutSeconds * VISIBILITY_TIMEOUT_FACTOR);
  });
});

it('outputs exactly what `agent-jobs doctor` checks', () => {
  expect(Object.keys(json.Outputs ?? {}).sort()).toEqual(expectedOutputKeys().sort());
});

it('the dashboard shows every queue, DLQ and function and the job outcome metrics', () => {
  const dashboards = resourcesOf(json, 'AWS::CloudWatch::Dashboard');
  expect(dashboards).toHaveLength(1);
  const body = JSON.stringify(dashboards[0]![1].Properties!['DashboardBody']);
  for (const { queue, worker } of stack.lanes) {
    for (const construct of [queue.queue, queue.deadLetterQueue as sqs.Queue, worker.function])
      expect(body).toContain(logicalId(construct));
  }
  for (const metric of Object.values(JOB_METRICS)) expect(body).toContain(`MetricName=\\\\\\"${metric}\\\\\\"`);
  expect(body).toContain(`Namespace=\\\\\\"${METRICS_NAMESPACE}\\\\\\"`);
});

describe('DLQ age alarms', () => {
  const DAY = 24 * 3600;
  const ageAlarmOf = (consumer: string) =>
    lane(consumer).queue.dlqAgeAlarm!.node.defaultChild as { alarmDescription?: string; threshold?: number };

  it('on the FIFO DLQ count from the move (SQS resets the enqueue time of a FIFO message it moves) and fire with 3 days left', () => {
    const alarm = ageAlarmOf('sequencer');
    expect(alarm.threshold).toBe((DLQ_RETENTION_DAYS - 3) * DAY);
    expect(alarm.alarmDescription).toMatch(
      /SQS deletes it 14 days after it was moved there \(a FIFO DLQ counts from the move\), 3 days from now/,
    );
    expect(alarm.alarmDescription).not.toMatch(/original enqueue/);
  });

  it.each(['build_events', 'run_tests'])(
    'on the standard DLQ of %s count the time the message spent on its queue, so the alarm still leaves 3 days',
    (consumer) => {
      const alarm = ageAlarmOf(consumer);
      expect(alarm.threshold).toBe((DLQ_RETENTION_DAYS - QUEUE_RETENTION_DAYS - 3) * DAY);
      expect(alarm.alarmDescription).toMatch(
        /SQS deletes a message 14 days after it was first sent to the queue: its time there \(up to 4 days\) counts, so it has at least 3 days left/,
      );
    },
  );
});

describe('build completion by event', () => {
  it("the rule takes only the command-runner project's ended builds from the default bus", () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventBusName: Match.absent(),
      EventPattern: {
        source: ['aws.codebuild'],
        'detail-type': ['CodeBuild Build State Change'],
        detail: {
          'project-name': [ref(stack.testRunner.project)],
          'build-status': ['SUCCEEDED', 'FAILED', 'FAULT', 'STOPPED', 'TIMED_OUT'],
        },
      },
    });
  });

  it('the reconciler runs every few minutes and its overdue alarm names what to do', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: `rate(${BUILD_RECONCILER.everyMinutes} minutes)`,
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: JOB_METRICS.oldestOverdueBuild,
      AlarmDescription: Match.stringLikeRegexp('no verdict .* past its build.s timeout, or the reconciler has not run'),
    });
  });
});

describe('run_lint, the example command stage: a catalog entry and nothing else', () => {
  it('has its own queue, DLQ, outputs and function, which is the shared command-stage function told it serves run_lint', () => {
    const lint = lane('run_lint');
    expect(lint.spec).toMatchObject({ name: 'run-lint', role: 'stage', fifo: false, dlqName: 'run-lint-dlq' });
    expect(envOf(json, logicalId(lint.worker.function))).toMatchObject({
      [ENV.stageJobType]: 'run_lint',
      [ENV.testRunnerProject]: ref(stack.testRunner.project),
    });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: ref(lint.worker.function),
      EventSourceArn: { 'Fn::GetAtt': [logicalId(lint.queue.queue), 'Arn'] },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
    expect(json.Outputs).toMatchObject({
      QueueUrlRunLint: { Value: ref(lint.queue.queue) },
      DlqUrlRunLint: { Value: ref(lint.queue.deadLetterQueue as sqs.Queue) },
    });
  });

  it('is forwarded to by the sequencer and reported by the build-completion path, which copies its failed jobs to its DLQ', () => {
    const lint = lane('run_lint');
    expect(envOf(json, logicalId(lane('sequencer').worker.function))).toMatchObject({
      [stageQueueUrlEnv('run_lint')]: ref(lint.queue.queue),
    });
    for (const reporter of [lane('build_events').worker.function, stack.buildReconciler!.worker.function]) {
      expect(envOf(json, logicalId(reporter))).toMatchObject({
        [stageDlqUrlEnv('run_lint')]: ref(lint.queue.deadLetterQueue as sqs.Queue),
      });
    }
  });
});

describe('environments', () => {
  it('dev and prod synthesize side by side in one app with no physical name in common', () => {
    const twoEnvs = newApp();
    const [dev, prod] = [addStack(twoEnvs, 'dev'), addStack(twoEnvs, 'prod')].map(
      (s) => Template.fromStack(s).toJSON() as TemplateJson,
    ) as [TemplateJson, TemplateJson];
    const NAME_KEYS =
      /^(Name|QueueName|TableName|BucketName|FunctionName|RoleName|TopicName|LogGroupName|DashboardName|AlarmName|ProjectName)$/;
    const names = (t: TemplateJson): string[] =>
      Object.values(t.Resources).flatMap((r) =>
        Object.entries(r.Properties ?? {})
          .filter(([k, v]) => NAME_KEYS.test(k) && typeof v === 'string')
          .map(([, v]) => v as string),
      );
    expect(names(dev).filter((n) => names(prod).includes(n))).toEqual([]);
    expect(
      twoEnvs
        .synth()
        .stacks.map((s) => s.stackName)
        .sort(),
    ).toEqual(['AgentJobs-dev', 'AgentJobs-prod']);
  });

  it('retainOnDestroy false lets queues, DLQs, created secrets and the alarm key go with the stack; the ledger stays, protected', () => {
    const t = synth({ retainOnDestroy: false }).template.toJSON() as TemplateJson;
    for (const type of ['AWS::SQS::Queue', 'AWS::SecretsManager::Secret', 'AWS::KMS::Key']) {
      const policies = resourcesOf(t, type).map(([, r]) => r.DeletionPolicy);
      expect({ type, policies: [...new Set(policies)] }).toEqual({ type, policies: ['Delete'] });
    }
    const tables = resourcesOf(t, 'AWS::DynamoDB::Table').map(([, table]) => [
      table.DeletionPolicy,
      table.Properties!['DeletionProtectionEnabled'],
    ]);
    expect(tables).toEqual([['Retain', true]]);
  });

  it('imports configured secrets by ARN, outputs those ARNs, and grants decryption with their customer-managed key through Secrets Manager only', () => {
    const git = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:agent-jobs/git-AbCdEf';
    const gitRead = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:agent-jobs/git-read-XyZaBc';
    const gh = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:agent-jobs/github-GhIjKl';
    const key = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';
    const { stack: imported, template: t } = synth(
      {
        gitCredentialsSecretArn: git,
        gitReadCredentialsSecretArn: gitRead,
        githubTokenSecretArn: gh,
        secretsKmsKeyArn: key,
        githubApiUrl: 'https://ghe.example.com/api/v3',
        leaseSeconds: 300,
      },
      'prod',
    );
    t.resourceCountIs('AWS::SecretsManager::Secret', 0);
    expect(t.toJSON().Outputs).toMatchObject({
      [STACK_OUTPUTS.gitCredentialsSecretArn]: { Value: git },
      [STACK_OUTPUTS.gitReadCredentialsSecretArn]: { Value: gitRead },
      [STACK_OUTPUTS.githubTokenSecretArn]: { Value: gh },
    });
    t.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectLike({
          [ENV.githubTokenSecretArn]: gh,
          [ENV.githubApiUrl]: 'https://ghe.example.com/api/v3',
          [ENV.leaseSeconds]: '300',
        }),
      },
    });
    const statementsOf = (role: { node: { defaultChild?: unknown } }) => {
      const roleId = imported.getLogicalId(role.node.defaultChild as never);
      return Object.values(t.findResources('AWS::IAM::Policy'))
        .filter((p) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: roleId }]))
        .flatMap((p) => p.Properties.PolicyDocument.Statement as Record<string, unknown>[]);
    };
    const decrypt = (secret: string) => ({
      Effect: 'Allow',
      Action: 'kms:Decrypt',
      Resource: key,
      Condition: {
        StringEquals: {
          'kms:ViaService': 'secretsmanager.eu-west-1.amazonaws.com',
          'kms:EncryptionContext:SecretARN': secret,
        },
      },
    });
    const readers = [
      [imported.lanes.find((l) => l.spec.consumer === 'sequencer')!.worker.role, git],
      [imported.lanes.find((l) => l.spec.consumer === 'open_pr')!.worker.role, gh],
      ...COMMAND_JOB_TYPES.map(
        (type) => [imported.lanes.find((l) => l.spec.consumer === type)!.worker.role, gitRead] as const,
      ),
    ] as const;
    for (const [role, secret] of readers) {
      const statements = statementsOf(role);
      expect(statements).toContainEqual({ Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: secret });
      expect(statements.filter((s) => String(s['Action']).startsWith('kms:'))).toEqual([decrypt(secret)]);
    }
    // The build never reads an operator's secret, so it needs no key either.
    expect(
      statementsOf(imported.testRunner.role).filter(
        (s) => String(s['Action']).startsWith('kms:') || JSON.stringify(s['Resource']).includes('git-read'),
      ),
    ).toEqual([]);
  });

  it("a build timeout from the environment reaches the project and the command stages (up to CodeBuild's 8 hours)", () => {
    const { template: t } = synth({ testRunnerTimeoutMinutes: 480 });
    t.hasResourceProperties('AWS::CodeBuild::Project', { TimeoutInMinutes: 480 });
    t.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectLike({ [ENV.stageJobType]: 'run_tests', [ENV.buildTimeoutMinutes]: '480' }),
      },
    });
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
    expect(nagFindings(bare)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^AwsSolutions-SQS3 at Bare\/Queue/),
        expect.stringMatching(/^AwsSolutions-SQS4 at Bare\/Queue/),
      ]),
    );
  });
});
