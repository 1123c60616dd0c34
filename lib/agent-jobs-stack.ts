/**
 * The whole platform in one stack, derived from the catalog: one lane (queue + DLQ + worker) per
 * entry of platformQueues(), so a new job type gets its queue, DLQ, function, event source mapping,
 * alarms, dashboard row, grants and outputs with no change here.
 *
 * Environment-agnostic and without physical names, so `AgentJobs-dev` and `AgentJobs-prod` deploy
 * side by side into one account and synthesize offline.
 */
import { join } from 'node:path';
import { Aws, CfnOutput, Duration, RemovalPolicy, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';
import { BUILD_RECONCILER, JOB_TYPES, commandStageOf } from '../contract/job-types';
import {
  ENV,
  JOB_METRICS,
  METRICS_NAMESPACE,
  METRICS_SERVICE,
  stageDlqUrlEnv,
  stageQueueUrlEnv,
} from '../contract/runtime-env';
import { LEDGER_RETENTION_DAYS, LEDGER_TABLE, platformQueues, type QueueSpec } from '../contract/topology';
import { bindCapabilities, type CapabilityResources } from './capabilities';
import { catalogProblems } from './catalog-rules';
import type { AgentJobsConfig } from './config';
import { ALARM_PERIOD, alarmAbove } from './constructs/alarms';
import { Ledger } from './constructs/ledger';
import { OpsDashboard } from './constructs/ops-dashboard';
import { QueueWithDlq } from './constructs/queue-with-dlq';
import { BuildReconciler } from './constructs/build-reconciler';
import { InvalidSettingsError } from './constructs/settings-problems';
import { TestRunner } from './constructs/test-runner';
import { Worker } from './constructs/worker';
import { platformSecret, type PlatformSecret, type SecretShape } from './secrets';
import {
  BUILD_RECONCILER_LOG_GROUP_OUTPUT,
  STACK_OUTPUTS,
  dlqUrlOutputKey,
  logGroupOutputKey,
  queueUrlOutputKey,
} from '../contract/stack-outputs';

export interface AgentJobsStackProps extends StackProps {
  readonly config: AgentJobsConfig;
  /** Directory that handler entries (catalog `handlerEntry`) are relative to. @default the repository root */
  readonly projectRoot?: string;
}

/** Periods of ALARM_PERIOD in a row with a limit's wait before its alarm fires: one burst is back-pressure working, not an incident. */
const RATE_LIMIT_ALARM_PERIODS = 3;

interface LaneContext {
  readonly alarmAction: cloudwatch.IAlarmAction;
  /** Of what holds jobs or credentials: queues, DLQs, created secrets (config retainOnDestroy). */
  readonly removalPolicy: RemovalPolicy;
  readonly projectRoot: string;
  readonly config: AgentJobsConfig;
  readonly resources: CapabilityResources;
}

/** A queue and the worker that consumes it. */
export interface Lane {
  readonly spec: QueueSpec;
  readonly queue: QueueWithDlq;
  readonly worker: Worker;
}

export class AgentJobsStack extends Stack {
  readonly lanes: readonly Lane[];
  readonly ledger: Ledger;
  readonly eventBus: events.EventBus;
  readonly diffBucket: s3.Bucket;
  readonly alarmTopic: sns.Topic;
  readonly testRunner: TestRunner;
  /** The sequencer's push credential, the test builds' read-only one, the GitHub token. */
  readonly secrets: Readonly<Record<'gitCredentials' | 'gitReadCredentials' | 'githubToken', PlatformSecret>>;
  /** Present when the catalog has command stages: the rule that sends their builds' ends to the build-events queue. */
  readonly buildEventsRule?: events.Rule;
  readonly buildReconciler?: BuildReconciler;
  /** GitHub's rate limits answered in every period for a while: jobs wait, and keep waiting. */
  readonly rateLimitAlarm: cloudwatch.Alarm;
  /** Checkout secrets throttled or refused in every period for a while: command-stage jobs wait to start their builds. */
  readonly checkoutSecretsAlarm?: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: AgentJobsStackProps) {
    super(scope, id, props);
    const { config } = props;
    const projectRoot = props.projectRoot ?? join(__dirname, '..');
    const removalPolicy = config.retainOnDestroy ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    const catalog = catalogProblems(JOB_TYPES, projectRoot);
    if (catalog.length > 0) throw new InvalidSettingsError('the job-type catalog (contract/job-types.ts)', catalog);

    this.alarmTopic = this.createAlarmTopic(config.alarmEmail, removalPolicy);
    const alarmAction = new actions.SnsAction(this.alarmTopic);
    this.ledger = new Ledger(this, 'Ledger');
    this.eventBus = new events.EventBus(this, 'EventBus');
    this.diffBucket = this.createDiffBucket();
    const secret = (id: string, shape: SecretShape, arn: string | undefined, description: string): PlatformSecret =>
      platformSecret(this, id, { arn, kmsKeyArn: config.secretsKmsKeyArn, shape, description, removalPolicy });
    this.secrets = {
      gitCredentials: secret(
        'GitCredentials',
        'gitCredentials',
        config.gitCredentialsSecretArn,
        'agent-jobs git push credential for the workspace remotes (sequencer): JSON {"username","password"}',
      ),
      gitReadCredentials: secret(
        'GitReadCredentials',
        'gitCredentials',
        config.gitReadCredentialsSecretArn,
        'agent-jobs read-only git credential for test builds: JSON {"username","password"}',
      ),
      githubToken: secret(
        'GithubToken',
        'token',
        config.githubTokenSecretArn,
        'agent-jobs GitHub token (plain string)',
      ),
    };
    this.testRunner = new TestRunner(this, 'TestRunner', {
      timeout: Duration.minutes(config.testRunnerTimeoutMinutes),
      // Builds running at once are bounded here, not by the command stages' concurrency: a stage's
      // invocation starts a build and ends, so its batchSize x maxConcurrency bounds starts in
      // flight, and a start beyond the limit waits (never fails), however many stages ask.
      concurrentBuildLimit: config.buildConcurrencyQuota,
    });
    const resources: CapabilityResources = {
      gitCredentials: this.secrets.gitCredentials,
      gitReadCredentials: this.secrets.gitReadCredentials,
      githubToken: this.secrets.githubToken,
      githubApiUrl: config.githubApiUrl,
      githubContentRequestsPerHour: config.githubContentRequestsPerHour,
      gitHosts: config.gitHosts,
      diffBucket: this.diffBucket,
      testRunner: this.testRunner,
    };

    const shared: LaneContext = { alarmAction, removalPolicy, projectRoot, config, resources };
    this.lanes = platformQueues(config.workers).map((spec) => this.addLane(spec, shared));
    this.wireSequencer();
    const buildEvents = this.lanes.find((l) => l.spec.role === 'buildEvents');
    if (buildEvents) {
      this.buildEventsRule = this.wireBuildEvents(buildEvents);
      this.buildReconciler = new BuildReconciler(this, 'build-reconciler', {
        entry: join(projectRoot, BUILD_RECONCILER.handlerEntry),
        settings: BUILD_RECONCILER,
        alarmAction,
        environment: { [ENV.ledgerRetentionDays]: String(LEDGER_RETENTION_DAYS) },
      });
      const fn = this.buildReconciler.worker.function;
      this.ledger.bind(fn, LEDGER_TABLE.dueIndex);
      this.bindOutcomeReporting(this.buildReconciler.worker);
      bindCapabilities(this.buildReconciler.worker, BUILD_RECONCILER.needs, resources);
    }

    this.rateLimitAlarm = this.limitPersistsAlarm(
      'GitHubRateLimitedAlarm',
      JOB_METRICS.githubRateLimited,
      alarmAction,
      'GitHub has answered with rate limits',
      'jobs wait for GitHub, none fails. The function logs say which limit ("waiting for a limit"). ' +
        'Lower githubContentRequestsPerHour (pull requests opened an hour), or give the platform a token of its own: the limits are per token.',
    );
    if (buildEvents) {
      // A wait no time cures (LimitExceededException for an account's secrets) would otherwise go on unseen.
      this.checkoutSecretsAlarm = this.limitPersistsAlarm(
        'CheckoutSecretsThrottledAlarm',
        JOB_METRICS.checkoutSecretsThrottled,
        alarmAction,
        "Secrets Manager has throttled or refused the test builds' checkout secrets",
        'command-stage jobs wait to start their builds, none fails. ' +
          "The command stages' logs name the call and the error: a throttle passes with the burst; LimitExceededException on CreateSecret (the account's secrets per region) needs secrets removed or a quota raised.",
      );
    }
    new OpsDashboard(this, 'Dashboard', {
      lanes: this.lanes.map((l) => ({ name: l.spec.name, ...l })),
      metricsNamespace: METRICS_NAMESPACE,
    });
    this.addOutputs();
  }

  /** An alarm on a limit's wait counted (one of JOB_METRICS) in each of RATE_LIMIT_ALARM_PERIODS periods in a row. */
  private limitPersistsAlarm(
    id: string,
    metricName: string,
    alarmAction: cloudwatch.IAlarmAction,
    what: string,
    then: string,
  ): cloudwatch.Alarm {
    return alarmAbove(this, id, {
      metric: new cloudwatch.Metric({
        namespace: METRICS_NAMESPACE,
        metricName,
        dimensionsMap: { service: METRICS_SERVICE },
        statistic: cloudwatch.Stats.SUM,
        period: ALARM_PERIOD,
      }),
      threshold: 0,
      evaluationPeriods: RATE_LIMIT_ALARM_PERIODS,
      description: `${this.node.path}: ${what} in each of the last ${RATE_LIMIT_ALARM_PERIODS * ALARM_PERIOD.toMinutes()} minutes: ${then}`,
      action: alarmAction,
    });
  }

  /** A queue with its DLQ and the worker that consumes it, granted what the catalog says it needs. */
  private addLane(spec: QueueSpec, shared: LaneContext): Lane {
    const { worker: settings } = spec;
    // One scope per lane, named by the catalog key (unique), so a queue named like its job type cannot clash.
    const scope = new Construct(this, spec.consumer);
    const queue = new QueueWithDlq(scope, 'Queue', {
      fifo: spec.fifo,
      consumer: {
        timeout: Duration.seconds(settings.timeoutSeconds),
        batchSize: settings.batchSize,
        maxConcurrency: settings.maxConcurrency,
      },
      visibilityTimeout: Duration.seconds(spec.visibilityTimeoutSeconds),
      maxReceiveCount: spec.maxReceiveCount,
      oldestMessageAlarmThreshold: Duration.seconds(settings.oldestMessageAlarmSeconds),
      alarmAction: shared.alarmAction,
      removalPolicy: shared.removalPolicy,
    });
    const worker = new Worker(scope, 'Worker', {
      entry: join(shared.projectRoot, settings.handlerEntry),
      separateFiles: settings.separateFiles?.map((f) => ({ ...f, entry: join(shared.projectRoot, f.entry) })),
      queue,
      memorySize: settings.memoryMb,
      alarmAction: shared.alarmAction,
      environment: {
        // A worker cannot outlive its timeout, so by then its lease is certainly abandoned.
        [ENV.leaseSeconds]: String(shared.config.leaseSeconds ?? settings.timeoutSeconds),
        [ENV.ledgerRetentionDays]: String(LEDGER_RETENTION_DAYS),
        [ENV.maxReceiveCount]: String(spec.maxReceiveCount),
      },
    });
    this.ledger.bind(worker.function);
    this.eventBus.grantPutEventsTo(worker.function);
    worker.function.addEnvironment(ENV.eventBus, this.eventBus.eventBusName);
    bindCapabilities(worker, settings.needs, shared.resources, settings.maxConcurrency);
    if (spec.role === 'stage') {
      worker.function.addEnvironment(ENV.stageJobType, spec.consumer);
      // A job that waits for a limit goes back on its queue as a fresh copy (src/core/pipeline.ts).
      worker.allow(['sqs:SendMessage'], [queue.queue.queueArn]);
    }
    return { spec, queue, worker };
  }

  /**
   * What reports a command stage's outcome needs: the event bus, and sending a failed job's message
   * copy to its stage's DLQ (the build-events consumer and the reconciler).
   */
  private bindOutcomeReporting(worker: Worker): void {
    this.eventBus.grantPutEventsTo(worker.function);
    worker.function.addEnvironment(ENV.eventBus, this.eventBus.eventBusName);
    for (const stage of this.lanes.filter((l) => l.spec.role === 'stage' && commandStageOf(l.spec.consumer))) {
      worker.allow(['sqs:SendMessage'], [stage.queue.deadLetterQueue.queueArn]);
      worker.function.addEnvironment(stageDlqUrlEnv(stage.spec.consumer), stage.queue.deadLetterQueue.queueUrl);
    }
  }

  /**
   * CodeBuild's "Build State Change" events of the command-runner project, when a build ends, go
   * from the default bus to the build-events queue (whose DLQ also takes what EventBridge cannot
   * deliver); its consumer records the verdicts.
   */
  private wireBuildEvents(lane: Lane): events.Rule {
    this.bindOutcomeReporting(lane.worker);
    const rule = new events.Rule(this, 'BuildEventsRule', {
      description: 'agent-jobs: command-stage builds that ended, to the build-events queue',
      eventPattern: {
        source: ['aws.codebuild'],
        detailType: ['CodeBuild Build State Change'],
        detail: {
          'project-name': [this.testRunner.project.projectName],
          'build-status': ['SUCCEEDED', 'FAILED', 'FAULT', 'STOPPED', 'TIMED_OUT'],
        },
      },
    });
    rule.addTarget(new targets.SqsQueue(lane.queue.queue, { deadLetterQueue: lane.queue.deadLetterQueue }));
    return rule;
  }

  /** The sequencer (FIFO lane) pins staged jobs and forwards them to every staged lane's queue. */
  private wireSequencer(): void {
    const sequencer = this.lanes.find((l) => l.spec.role === 'ordered');
    if (!sequencer) throw new InvalidSettingsError('platformQueues()', ['no FIFO lane for the sequencer']);
    for (const stage of this.lanes.filter((l) => l.spec.role === 'stage')) {
      sequencer.worker.allow(['sqs:SendMessage'], [stage.queue.queue.queueArn]);
      sequencer.worker.function.addEnvironment(stageQueueUrlEnv(stage.spec.consumer), stage.queue.queue.queueUrl);
    }
  }

  /**
   * The one topic every alarm notifies. Its explicit policy (TLS only) replaces SNS's default one,
   * so CloudWatch may publish only because a statement says so; encrypted with a customer-managed
   * key, because CloudWatch cannot use the AWS-managed SNS key, and the key lets CloudWatch use it
   * under the same conditions: alarms of this account and region only (confused deputy).
   */
  private createAlarmTopic(email: string | undefined, removalPolicy: RemovalPolicy): sns.Topic {
    const cloudwatch = new iam.ServicePrincipal('cloudwatch.amazonaws.com');
    const fromThisAccountsAlarms = {
      StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID },
      ArnLike: { 'aws:SourceArn': `arn:${Aws.PARTITION}:cloudwatch:${Aws.REGION}:${Aws.ACCOUNT_ID}:alarm:*` },
    };
    const key = new kms.Key(this, 'AlarmTopicKey', {
      description: 'agent-jobs alarm topic encryption',
      enableKeyRotation: true,
      // It encrypts notifications in flight only: nothing stays encrypted under it once the stack is gone.
      removalPolicy,
    });
    key.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'CloudWatchAlarmsEncryptNotifications',
        principals: [cloudwatch],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
        conditions: fromThisAccountsAlarms,
      }),
    );
    const topic = new sns.Topic(this, 'AlarmTopic', { masterKey: key, enforceSSL: true });
    topic.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'CloudWatchAlarmsPublish',
        principals: [cloudwatch],
        actions: ['sns:Publish'],
        resources: [topic.topicArn],
        conditions: fromThisAccountsAlarms,
      }),
    );
    if (email) topic.addSubscription(new subscriptions.EmailSubscription(email));
    return topic;
  }

  private createDiffBucket(): s3.Bucket {
    const bucket = new s3.Bucket(this, 'DiffBucket', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      minimumTLSVersion: 1.2,
      // Diffs must outlive any replay from a DLQ (14 days); the ledger keeps its records as long.
      lifecycleRules: [
        { expiration: Duration.days(LEDGER_RETENTION_DAYS), abortIncompleteMultipartUploadAfter: Duration.days(1) },
      ],
      removalPolicy: RemovalPolicy.RETAIN,
      autoDeleteObjects: false,
    });
    Validations.of(bucket).acknowledge({
      id: 'AwsSolutions-S1',
      reason:
        'No server access logs: the bucket holds short-lived claim-check diffs, written by producers and read only by the ' +
        "sequencer's role; a team that must audit object access enables CloudTrail data events on it (README, Deploy).",
    });
    return bucket;
  }

  private addOutputs(): void {
    const output = (key: string, value: string): CfnOutput => new CfnOutput(this, key, { value });
    for (const { spec, queue, worker } of this.lanes) {
      output(queueUrlOutputKey(spec.name), queue.queue.queueUrl);
      output(dlqUrlOutputKey(spec.name), queue.deadLetterQueue.queueUrl);
      // `agent-jobs logs` links to a job's lines in each function's log group.
      output(logGroupOutputKey(spec.consumer), worker.logGroup.logGroupName);
    }
    if (this.buildReconciler)
      output(BUILD_RECONCILER_LOG_GROUP_OUTPUT, this.buildReconciler.worker.logGroup.logGroupName);
    output(STACK_OUTPUTS.ledgerTableName, this.ledger.table.tableName);
    output(STACK_OUTPUTS.eventBusName, this.eventBus.eventBusName);
    output(STACK_OUTPUTS.diffBucketName, this.diffBucket.bucketName);
    output(STACK_OUTPUTS.alarmTopicArn, this.alarmTopic.topicArn);
    output(STACK_OUTPUTS.testRunnerProjectName, this.testRunner.project.projectName);
    output(STACK_OUTPUTS.gitCredentialsSecretArn, this.secrets.gitCredentials.secret.secretArn);
    output(STACK_OUTPUTS.gitReadCredentialsSecretArn, this.secrets.gitReadCredentials.secret.secretArn);
    output(STACK_OUTPUTS.githubTokenSecretArn, this.secrets.githubToken.secret.secretArn);
  }
}
