/**
 * The assembly run: the cloud assembly's functions, from their assets in cdk.out, wired to local
 * resources and nothing else. It is a second composition of the same template, not a second
 * platform: every queue, the table and the bucket are created from the template's own properties on
 * the emulators the local platform uses (fauxqs, and dynalite or, in the
 * DynamoDB Local lane, DynamoDB Local); every function is run by the Lambda
 * service of lambda-service.ts with the template's handler, runtime, timeout, memory and
 * environment; its triggers are the template's event source mappings (the local platform's poller,
 * with the batch size, concurrency and response types the template sets, polling with the
 * function's role), its rules (EventBridge's default bus delivering CodeBuild's events to their
 * target, the schedule invoking its function). Services without an emulator are stand-ins
 * (stand-ins.ts), CloudFormation among them, describing the stack with the template's outputs, so
 * the operator's CLI finds the run's resources as it finds a deployed stack's
 * (`operatorEnvironment`). Every AWS call goes through the run's AWS endpoint (aws-endpoint.ts),
 * which records it for the IAM simulation (iam.ts).
 *
 * Whatever the run would have to be told by hand is a gap in the template. What it still cannot
 * see: IAM itself (simulated), the service-side behaviour of SQS, DynamoDB and S3 beyond the
 * emulators', and the Lambda runtime's own SDK (the bundles carry theirs: docs/decisions.md §22).
 */
import { randomUUID } from 'node:crypto';
import { SQSClient, CreateQueueCommand, GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SQSEvent, SQSBatchResponse } from 'aws-lambda';
import { localClientConfig, startEmulators, type LocalEmulators } from '../../tools/local/emulators';
import { startQueuePoller, type QueuePoller } from '../../tools/local/poller';
import type { JobLogger } from '../../src/core/ports';
import { startAwsEndpoint, type AwsEndpoint, type Principal, type RecordedCall } from './aws-endpoint';
import { ACCOUNT, REGION, type AssemblyFunction, type CloudAssembly } from './cloud-assembly';
import { matchesEventPattern } from './event-pattern';
import { LambdaService, type InvocationResult, type InvokeOptions } from './lambda-service';
import { startSandbox, type Sandbox, type SandboxHost } from './sandbox';
import {
  startCloudFormation,
  startCodeBuild,
  startEventBridge,
  startSecretsManager,
  type StandInBuild,
} from './stand-ins';

/** AWS_ENDPOINT_URL inside the sandbox. */
const AWS_ENDPOINT = { name: 'aws.agent-jobs.test', address: '127.0.0.1', port: 4566 };

export interface AssemblyRunOptions {
  readonly assembly: CloudAssembly;
  /** The Node.js binary of the template's runtime major. */
  readonly node: string;
  /** Further hosts the functions reach (the git host, GitHub), with the loopback port of their server. */
  readonly hosts?: readonly SandboxHost[];
  /**
   * A certificate the functions trust (NODE_EXTRA_CA_CERTS, the variable a function whose hosts
   * use a private CA is given): the one of the run's TLS front for the git host and GitHub. It
   * must be outside the OS temp folder, which each function's private /tmp hides.
   */
  readonly extraCaCerts?: string;
}

export type AssemblyRun = Awaited<ReturnType<typeof startAssemblyRun>>;

/** A failed invocation, kept for the test's messages. */
export interface InvocationFailure {
  readonly function: string;
  readonly error: string;
}

// Template values are open-ended JSON.
type Json = any;

const silentLogger = (failures: string[]): JobLogger =>
  ({
    info: () => undefined,
    warn: () => undefined,
    error: (message: string, fields?: Record<string, unknown>) =>
      void failures.push(`${message} ${JSON.stringify(fields ?? {})}`),
  }) as unknown as JobLogger;

export async function startAssemblyRun(options: AssemblyRunOptions) {
  const { assembly } = options;
  const functions = assembly.functions();
  const stops: (() => Promise<unknown>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  };
  try {
    const emulators: LocalEmulators = await startEmulators({ topology: [] });
    stops.push(() => emulators.stop());
    const queueUrls = await createQueues(assembly, emulators);
    await createTable(assembly, emulators);
    await createBuckets(assembly, emulators);
    const eventBridge = await startEventBridge();
    stops.push(() => eventBridge.close());
    const secretsManager = await startSecretsManager(
      Object.fromEntries(
        assembly
          .ofType('AWS::SecretsManager::Secret')
          .map(([id, s]) => [assembly.ref(id), String(s.Properties?.['SecretString'] ?? '')]),
      ),
    );
    stops.push(() => secretsManager.close());
    const cloudFormation = await startCloudFormation({
      StackName: assembly.stackName,
      StackId: assembly.stackId,
      Outputs: assembly.outputs(),
    });
    stops.push(() => cloudFormation.close());

    let endpoint: AwsEndpoint | undefined;
    const codeBuild = await startCodeBuild({ onStart: (build) => recordBuildRole(build) });
    stops.push(() => codeBuild.close());
    endpoint = await startAwsEndpoint({
      targets: {
        sqs: emulators.endpoints.sqs,
        s3: emulators.endpoints.s3,
        dynamodb: emulators.endpoints.dynamodb,
        events: eventBridge.url,
        secretsmanager: secretsManager.url,
        codebuild: codeBuild.url,
        cloudformation: cloudFormation.url,
      },
      queueUrls,
      secretArnOf: secretsManager.arnOf,
    });
    stops.push(() => endpoint!.close());
    const calls = endpoint.calls;
    const record = (call: RecordedCall) => calls.push(call);
    const clientConfig = (principal: Principal) => ({
      endpoint: `http://127.0.0.1:${endpoint!.port}`,
      region: REGION,
      credentials: { accessKeyId: endpoint!.keyFor(principal), secretAccessKey: 'assembly-run' },
    });
    const operator = { kind: 'operator' } as const;

    /** What CodeBuild does with the project's service role for a build: the buildspec's secrets, its log group. */
    function recordBuildRole(build: StandInBuild): void {
      const [projectId, project] = assembly
        .ofType('AWS::CodeBuild::Project')
        .find(([id]) => assembly.ref(id) === build.projectName)!;
      const p = assembly.resolve(project.Properties);
      const roleArn: string = p.ServiceRole;
      const principal: Principal = { kind: 'role', name: projectId, roleArn };
      const spec = JSON.parse(p.Source.BuildSpec);
      // The buildspec's secrets, and the overrides' (the checkout secret a command stage names), each resolved as the build would.
      const references = [
        ...Object.values<string>(spec.env?.['secrets-manager'] ?? {}),
        ...build.environmentVariables.filter((v) => v.type === 'SECRETS_MANAGER').map((v) => v.value),
      ];
      for (const reference of references) {
        secretsManager.resolve(reference);
        const secret = secretsManager.arnOf(/^(arn:.+?:secret:[^:]+|[^:]+)/.exec(reference)![1]!) ?? reference;
        record({
          principal,
          service: 'secretsmanager',
          operation: 'GetSecretValue',
          action: 'secretsmanager:GetSecretValue',
          resources: [secret],
          context: { 'aws:SecureTransport': 'true' },
        });
      }
      const group = p.LogsConfig?.CloudWatchLogs?.GroupName;
      const stream = `arn:aws:logs:${REGION}:${ACCOUNT}:log-group:${group}:log-stream:${build.id.split(':')[1]}`;
      for (const action of ['logs:CreateLogStream', 'logs:PutLogEvents'])
        record({
          principal,
          service: 'logs',
          operation: action.split(':')[1]!,
          action,
          resources: [stream],
          context: {},
        });
    }

    const sandbox: Sandbox = await startSandbox([
      { ...AWS_ENDPOINT, hostPort: endpoint.port },
      ...(options.hosts ?? []),
    ]);
    stops.push(() => sandbox.stop());
    const logs = new Map<string, string[]>();
    const lambda = new LambdaService({
      sandbox,
      node: options.node,
      awsEndpoint: `http://${AWS_ENDPOINT.address}:${AWS_ENDPOINT.port}`,
      ...(options.extraCaCerts ? { extraCaCerts: options.extraCaCerts } : {}),
      credentialsOf: (fn) => ({
        accessKeyId: endpoint!.keyFor(roleOf(fn)),
        secretAccessKey: 'assembly-run',
        sessionToken: 'assembly-run',
      }),
      onLog: (fn, line) => logs.set(fn.logicalId, [...(logs.get(fn.logicalId) ?? []), line]),
      onEnvironment: (fn, change) => {
        // Each environment writes its START, END and REPORT lines (and what the function prints) to
        // a log stream of its own in the function's log group, with the execution role.
        if (change !== 'started') return;
        const stream = `arn:aws:logs:${REGION}:${ACCOUNT}:log-group:${fn.logGroupName}:log-stream:${randomUUID()}`;
        for (const action of ['logs:CreateLogStream', 'logs:PutLogEvents'])
          record({
            principal: roleOf(fn),
            service: 'logs',
            operation: action.split(':')[1]!,
            action,
            resources: [stream],
            context: {},
          });
      },
    });
    stops.push(() => lambda.stop());
    const failures: InvocationFailure[] = [];
    const invoke = async (
      fn: AssemblyFunction,
      event: unknown,
      options: InvokeOptions = {},
    ): Promise<InvocationResult> => {
      const result = await lambda.invoke(fn, event, options);
      if (!result.ok)
        failures.push({ function: fn.logicalId, error: `${result.error.errorType}: ${result.error.errorMessage}` });
      return result;
    };

    // The event source mappings, polling with the function's role as Lambda does.
    const pollerErrors: string[] = [];
    const pollers: QueuePoller[] = assembly.eventSourceMappings().map((mapping) => {
      const fn = functions.find((f) => f.logicalId === mapping.functionLogicalId)!;
      const sqs = new SQSClient(clientConfig(roleOf(fn)));
      stops.push(async () => sqs.destroy());
      return startQueuePoller({
        name: fn.logicalId,
        sqs,
        queueUrl: assembly.ref(mapping.queueLogicalId),
        queueArn: assembly.getAtt(mapping.queueLogicalId, 'Arn'),
        region: REGION,
        batchSize: mapping.batchSize,
        // Two concurrent environments at most: enough to show reuse and concurrency on two cores.
        maxConcurrency: Math.min(mapping.maximumConcurrency, 2),
        timeoutSeconds: fn.timeoutSeconds,
        waitTimeSeconds: 1,
        handler: async (event: SQSEvent) => {
          const result = await invoke(fn, event);
          if (!result.ok) throw new Error(`${result.error.errorType}: ${result.error.errorMessage}`);
          // Without ReportBatchItemFailures, Lambda ignores what the function returns.
          return mapping.functionResponseTypes.includes('ReportBatchItemFailures')
            ? (result.result as SQSBatchResponse)
            : undefined;
        },
        logger: silentLogger(pollerErrors),
      });
    });
    stops.push(() => Promise.all(pollers.map((p) => p.stop())));

    const rules = assembly
      .ofType('AWS::Events::Rule')
      .map(([id, r]) => ({ id, arn: assembly.getAtt(id, 'Arn'), props: assembly.resolve(r.Properties) }));
    const eventsPrincipal = (ruleArn: string): Principal => ({
      kind: 'service',
      service: 'events.amazonaws.com',
      sourceArn: ruleArn,
    });

    /** EventBridge's default bus: an AWS service's event, delivered to every matching rule's targets. */
    async function putOnDefaultBus(event: Json): Promise<number> {
      let delivered = 0;
      for (const rule of rules.filter(
        (r) => r.props.EventPattern && !r.props.EventBusName && r.props.State !== 'DISABLED',
      )) {
        if (!matchesEventPattern(rule.props.EventPattern, event)) continue;
        for (const target of rule.props.Targets as Json[]) {
          if (!String(target.Arn).startsWith('arn:aws:sqs:'))
            throw new Error(`rule ${rule.id}: the run delivers to SQS targets only, not ${target.Arn}`);
          const sqs = new SQSClient(clientConfig(eventsPrincipal(rule.arn)));
          const queueUrl = assembly.ref(
            assembly.ofType('AWS::SQS::Queue').find(([q]) => assembly.getAtt(q, 'Arn') === target.Arn)![0],
          );
          await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(event) }));
          sqs.destroy();
          delivered++;
        }
      }
      return delivered;
    }

    /**
     * A schedule rule fires: EventBridge invokes its function with a Scheduled Event. With a clock
     * offset, it fires that much later than now (the function's environment has its clock moved too).
     */
    async function fireSchedules(options: InvokeOptions = {}): Promise<InvocationResult[]> {
      const results: InvocationResult[] = [];
      for (const rule of rules.filter((r) => r.props.ScheduleExpression)) {
        for (const target of rule.props.Targets as Json[]) {
          const fn = functions.find((f) => f.arn === target.Arn);
          if (!fn) throw new Error(`rule ${rule.id}: its target ${target.Arn} is not a function of the template`);
          record({
            principal: eventsPrincipal(rule.arn),
            service: 'lambda',
            operation: 'Invoke',
            action: 'lambda:InvokeFunction',
            resources: [fn.arn],
            context: { 'aws:SourceAccount': ACCOUNT },
          });
          results.push(
            await invoke(
              fn,
              {
                version: '0',
                id: randomUUID(),
                'detail-type': 'Scheduled Event',
                source: 'aws.events',
                account: ACCOUNT,
                time: new Date(Date.now() + (options.clockOffsetMs ?? 0)).toISOString(),
                region: REGION,
                resources: [rule.arn],
                detail: {},
              },
              options,
            ),
          );
        }
      }
      return results;
    }

    const operatorClients = {
      sqs: new SQSClient(clientConfig(operator)),
      dynamodb: DynamoDBDocumentClient.from(new DynamoDBClient(clientConfig(operator)), {
        marshallOptions: { removeUndefinedValues: true },
      }),
      s3: new S3Client(clientConfig(operator)),
      secrets: new SecretsManagerClient(clientConfig(operator)),
    };
    stops.push(async () => Object.values(operatorClients).forEach((c) => c.destroy()));

    /** What the operator's CLI needs to reach the run as it reaches a deployed stack: AWS_ENDPOINT_URL and credentials. */
    const operatorEnvironment = (): Record<string, string> => ({
      AWS_ENDPOINT_URL: `http://127.0.0.1:${endpoint!.port}`,
      AWS_REGION: REGION,
      AWS_ACCESS_KEY_ID: endpoint!.keyFor(operator),
      AWS_SECRET_ACCESS_KEY: 'assembly-run',
    });

    function roleOf(fn: AssemblyFunction): Principal {
      return { kind: 'role', name: fn.logicalId, roleArn: fn.roleArn };
    }

    return {
      assembly,
      functions,
      calls,
      failures,
      pollerErrors,
      logs,
      lambda,
      eventBridge,
      codeBuild,
      secretsManager,
      operatorClients,
      putOnDefaultBus,
      fireSchedules,
      operatorEnvironment,
      invoke,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** The template's queues on fauxqs, dead-letter queues first: template URL -> fauxqs URL. */
async function createQueues(assembly: CloudAssembly, emulators: LocalEmulators): Promise<Map<string, string>> {
  const urls = new Map<string, string>();
  const fauxqsArn = new Map<string, string>();
  const queues = assembly.ofType('AWS::SQS::Queue');
  // In the run's region: fauxqs keeps queues per region, and a function's GetQueueUrl (signed for
  // the run's region, as on AWS) must find them.
  const sqs = new SQSClient({ ...localClientConfig(emulators.endpoints.sqs), region: REGION });
  const isTarget = (id: string) =>
    queues.some(([, q]) => q.Properties?.['RedrivePolicy']?.deadLetterTargetArn?.['Fn::GetAtt']?.[0] === id);
  for (const [id, queue] of [...queues].sort(([a], [b]) => Number(isTarget(b)) - Number(isTarget(a)))) {
    const p = assembly.resolve(queue.Properties ?? {});
    const attributes: Record<string, string> = {};
    for (const key of [
      'FifoQueue',
      'ContentBasedDeduplication',
      'DeduplicationScope',
      'FifoThroughputLimit',
      'VisibilityTimeout',
      'MessageRetentionPeriod',
      'MaximumMessageSize',
      'DelaySeconds',
      'ReceiveMessageWaitTimeSeconds',
    ]) {
      if (p[key] !== undefined) attributes[key] = String(p[key]);
    }
    if (p.RedrivePolicy) {
      const target = fauxqsArn.get(p.RedrivePolicy.deadLetterTargetArn);
      if (!target)
        throw new Error(
          `${id}: its dead-letter queue ${p.RedrivePolicy.deadLetterTargetArn} is not a queue of the template`,
        );
      attributes['RedrivePolicy'] = JSON.stringify({
        deadLetterTargetArn: target,
        maxReceiveCount: p.RedrivePolicy.maxReceiveCount,
      });
    }
    const created = await sqs.send(
      new CreateQueueCommand({ QueueName: assembly.physicalName(id), Attributes: attributes }),
    );
    const arn = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: created.QueueUrl, AttributeNames: ['QueueArn'] }),
    );
    urls.set(assembly.ref(id), created.QueueUrl!);
    fauxqsArn.set(assembly.getAtt(id, 'Arn'), arn.Attributes!['QueueArn']!);
  }
  return urls;
}

async function createTable(assembly: CloudAssembly, emulators: LocalEmulators): Promise<void> {
  for (const [id, table] of assembly.ofType('AWS::DynamoDB::Table')) {
    const p = assembly.resolve(table.Properties ?? {});
    // dynalite has no UpdateTimeToLive: the TimeToLiveSpecification is the template's to hold (test/infra).
    await emulators.clients.dynamodb.send(
      new CreateTableCommand({
        TableName: assembly.physicalName(id),
        KeySchema: p.KeySchema,
        AttributeDefinitions: p.AttributeDefinitions,
        BillingMode: p.BillingMode,
        GlobalSecondaryIndexes: p.GlobalSecondaryIndexes,
      }),
    );
  }
}

async function createBuckets(assembly: CloudAssembly, emulators: LocalEmulators): Promise<void> {
  for (const [id] of assembly.ofType('AWS::S3::Bucket'))
    await emulators.clients.s3.send(new CreateBucketCommand({ Bucket: assembly.physicalName(id) }));
}
