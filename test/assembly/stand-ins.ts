/**
 * Loopback stand-ins for the AWS services with no emulator here, speaking their documented wire
 * protocols (awsJson1_1: POST /, X-Amz-Target `<prefix>.<Operation>`, errors as
 * `{ __type, message }` with a 400; CloudFormation's awsQuery: a form-encoded `Action`, XML
 * answers). The run's AWS endpoint (aws-endpoint.ts) forwards to them, so what reaches them has
 * been recorded there already.
 *
 * - EventBridge: PutEvents only. Keeps every entry per bus and answers an EventId per entry. Does
 *   not model rules on custom buses, archives, quotas or entry size limits.
 * - Secrets Manager: GetSecretValue (the current version, or one by VersionId), PutSecretValue
 *   (a new current version) and CreateSecret (the command stages' checkout secrets), by complete
 *   ARN or by name; seeded from the template's secrets. A ClientRequestToken becomes the new
 *   version's id, as documented: the same token and value again is answered with that version, the
 *   same token with another value is refused (ResourceExistsException). Does not model version
 *   stages beyond AWSCURRENT, the removal of old versions, rotation, KMS or partial ARNs.
 * - CodeBuild: StartBuild (idempotency token honoured for five minutes, parameters compared),
 *   BatchGetBuilds, ListBuildsForProject (newest first), StopBuild (a running build becomes
 *   STOPPED; an ended one is answered as it is; it sends no state-change event). Builds run nothing: the test ends each
 *   with the status it chooses (`complete`), which is what a real build's outcome would be.
 *   Does not model queues, phases' timing, logs' content, environment overrides beyond the
 *   variables, or concurrency quotas.
 * - CloudFormation: DescribeStacks of the one stack the run deploys, CREATE_COMPLETE, with the
 *   outputs its template declares (values resolved as the run resolves every intrinsic): what the
 *   CLI reads to find a stack's resources. Does not model other stacks' names (ValidationError, as
 *   CloudFormation answers), events, drift, paging or any other operation.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ACCOUNT, PARTITION, REGION } from './cloud-assembly';

type Operations = Record<string, (input: any) => unknown>;

class ServiceError extends Error {
  constructor(
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

async function serve(operations: Operations): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const target = String(req.headers['x-amz-target'] ?? '');
      const operation = operations[target.slice(target.lastIndexOf('.') + 1)];
      const reply = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
        res.end(JSON.stringify(body));
      };
      try {
        if (!operation) throw new ServiceError('UnknownOperationException', `the stand-in does not model ${target}`);
        reply(200, operation(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}')));
      } catch (error) {
        if (error instanceof ServiceError) reply(400, { __type: error.type, message: error.message });
        else reply(500, { __type: 'InternalFailure', message: String(error) });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

// ---- EventBridge ------------------------------------------------------------------------------

export interface PutEvent {
  readonly bus: string;
  readonly source: string;
  readonly detailType: string;
  readonly detail: any;
}

export async function startEventBridge() {
  const events: PutEvent[] = [];
  const server = await serve({
    PutEvents: ({ Entries }: { Entries: any[] }) => {
      for (const e of Entries)
        events.push({
          bus: e.EventBusName ?? 'default',
          source: e.Source,
          detailType: e.DetailType,
          detail: JSON.parse(e.Detail),
        });
      return { FailedEntryCount: 0, Entries: Entries.map(() => ({ EventId: randomUUID() })) };
    },
  });
  return { ...server, events };
}

// ---- Secrets Manager --------------------------------------------------------------------------

interface StandInSecret {
  readonly arn: string;
  readonly name: string;
  readonly versions: Map<string, string>;
  current: string;
  /** Set by DeleteSecret with a recovery window: the secret answers InvalidRequestException until RestoreSecret. */
  deletedDate?: number;
}

/** The ARN Secrets Manager gives a new secret: its name and six characters of its own. */
export function newSecretArn(name: string): string {
  return `arn:${PARTITION}:secretsmanager:${REGION}:${ACCOUNT}:secret:${name}-${randomUUID().replace(/-/g, '').slice(0, 6)}`;
}

export async function startSecretsManager(seeded: Readonly<Record<string, string>>) {
  const secrets: StandInSecret[] = [];
  const add = (arn: string, value: string, version: string = randomUUID()): StandInSecret => {
    const secret = {
      arn,
      name: arn
        .split(':')
        .pop()!
        .replace(/-[A-Za-z0-9]{6}$/, ''),
      versions: new Map([[version, value]]),
      current: version,
    };
    secrets.push(secret);
    return secret;
  };
  for (const [arn, value] of Object.entries(seeded)) add(arn, value);
  /** Answers to come before an operation is served (fault injection: how AWS words them is not modelled). */
  const faults: { operation: string; type: string }[] = [];
  const refuseIfFaulted = (operation: string): void => {
    const at = faults.findIndex((f) => f.operation === operation);
    if (at >= 0) throw new ServiceError(faults.splice(at, 1)[0]!.type, 'Rate exceeded');
  };
  const find = (id: string): StandInSecret => {
    const found = secrets.find((s) => s.arn === id || s.name === id);
    if (!found) throw new ServiceError('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
    return found;
  };
  /** A secret scheduled for deletion refuses everything but DescribeSecret and RestoreSecret (Secrets Manager's words). */
  const usable = (id: string): StandInSecret => {
    const secret = find(id);
    if (secret.deletedDate !== undefined)
      throw new ServiceError(
        'InvalidRequestException',
        "You can't perform this operation on the secret because it was marked for deletion.",
      );
    return secret;
  };
  const server = await serve({
    GetSecretValue: ({ SecretId, VersionId }: { SecretId: string; VersionId?: string }) => {
      refuseIfFaulted('GetSecretValue');
      const secret = usable(SecretId);
      const version = VersionId ?? secret.current;
      const value = secret.versions.get(version);
      if (value === undefined)
        throw new ServiceError(
          'ResourceNotFoundException',
          "Secrets Manager can't find the specified secret value for VersionId.",
        );
      return {
        ARN: secret.arn,
        Name: secret.name,
        SecretString: value,
        VersionId: version,
        VersionStages: version === secret.current ? ['AWSCURRENT'] : [],
        CreatedDate: Date.now() / 1000,
      };
    },
    PutSecretValue: ({
      SecretId,
      SecretString,
      ClientRequestToken,
    }: {
      SecretId: string;
      SecretString: string;
      ClientRequestToken?: string;
    }) => {
      refuseIfFaulted('PutSecretValue');
      const secret = usable(SecretId);
      const version = ClientRequestToken ?? randomUUID();
      const existing = secret.versions.get(version);
      if (existing !== undefined && existing !== SecretString)
        throw new ServiceError(
          'ResourceExistsException',
          `A version ${version} of ${secret.name} exists with another value.`,
        );
      if (existing === undefined) {
        secret.versions.set(version, SecretString);
        secret.current = version;
      }
      return {
        ARN: secret.arn,
        Name: secret.name,
        VersionId: version,
        VersionStages: version === secret.current ? ['AWSCURRENT'] : [],
      };
    },
    CreateSecret: ({
      Name,
      SecretString,
      ClientRequestToken,
    }: {
      Name: string;
      SecretString: string;
      ClientRequestToken?: string;
    }) => {
      refuseIfFaulted('CreateSecret');
      const existing = secrets.find((s) => s.name === Name);
      if (existing?.deletedDate !== undefined)
        throw new ServiceError(
          'InvalidRequestException',
          "You can't perform this operation on the secret because it was marked for deletion.",
        );
      if (existing)
        throw new ServiceError(
          'ResourceExistsException',
          `The operation failed because the secret ${Name} already exists.`,
        );
      const secret = add(newSecretArn(Name), SecretString, ClientRequestToken);
      return { ARN: secret.arn, Name: secret.name, VersionId: secret.current };
    },
    DescribeSecret: ({ SecretId }: { SecretId: string }) => {
      refuseIfFaulted('DescribeSecret');
      const secret = find(SecretId);
      return {
        ARN: secret.arn,
        Name: secret.name,
        ...(secret.deletedDate !== undefined && { DeletedDate: secret.deletedDate / 1000 }),
      };
    },
    /** With a recovery window (7 to 30 days, 30 by default): the secret stays, marked; it is never removed here. */
    DeleteSecret: ({ SecretId, RecoveryWindowInDays }: { SecretId: string; RecoveryWindowInDays?: number }) => {
      refuseIfFaulted('DeleteSecret');
      const secret = find(SecretId);
      secret.deletedDate ??= Date.now() + (RecoveryWindowInDays ?? 30) * 86_400_000;
      return { ARN: secret.arn, Name: secret.name, DeletionDate: secret.deletedDate / 1000 };
    },
    RestoreSecret: ({ SecretId }: { SecretId: string }) => {
      refuseIfFaulted('RestoreSecret');
      const secret = find(SecretId);
      delete secret.deletedDate;
      return { ARN: secret.arn, Name: secret.name };
    },
  });
  return {
    ...server,
    /**
     * The next `times` requests of `operation` are refused with `type` (HTTP 400, as the JSON
     * protocol carries every Secrets Manager error), e.g. ThrottlingException past the regional
     * request quota. The SDK retries some of them itself: each attempt takes one.
     */
    refuseNext(
      operation: 'GetSecretValue' | 'PutSecretValue' | 'CreateSecret' | 'DescribeSecret' | 'RestoreSecret',
      times: number,
      type = 'ThrottlingException',
    ): void {
      for (let i = 0; i < times; i++) faults.push({ operation, type });
    },
    /** A secret's complete ARN from its ARN or its name (what IAM authorizes), or undefined for one that does not exist. */
    arnOf: (id: string): string | undefined => secrets.find((s) => s.arn === id || s.name === id)?.arn,
    /** How many versions a secret has had (none are removed here), 0 for one that does not exist. */
    versionCount: (id: string): number => secrets.find((s) => s.arn === id || s.name === id)?.versions.size ?? 0,
    /** What CodeBuild reads for a Secrets Manager reference `secret-id:json-key:version-stage:version-id`. */
    resolve(reference: string): string {
      const match = /^(arn:.+?:secret:[^:]+|[^:]+)(?::([^:]*))?(?::([^:]*))?(?::([^:]*))?$/.exec(reference);
      if (!match) throw new Error(`not a Secrets Manager reference: ${reference}`);
      const [, id, key, , version] = match;
      const secret = find(id!);
      const value = secret.versions.get(version || secret.current);
      if (value === undefined) throw new Error(`${reference}: no such version`);
      return key ? String((JSON.parse(value) as Record<string, unknown>)[key]) : value;
    },
  };
}

// ---- CloudFormation ---------------------------------------------------------------------------

export interface StandInStack {
  readonly StackName: string;
  readonly StackId: string;
  readonly Outputs: readonly { OutputKey: string; OutputValue: string; Description?: string; ExportName?: string }[];
}

const xml = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const element = (name: string, value: string | undefined) =>
  value === undefined ? '' : `<${name}>${xml(value)}</${name}>`;

export async function startCloudFormation(stack: StandInStack) {
  const NS = 'http://cloudformation.amazonaws.com/doc/2010-05-15/';
  const createdAt = new Date().toISOString();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const requestId = randomUUID();
      const reply = (status: number, body: string) => {
        res.writeHead(status, { 'content-type': 'text/xml' });
        res.end(body);
      };
      const action = form.get('Action');
      const name = form.get('StackName');
      if (action !== 'DescribeStacks') {
        return reply(
          400,
          `<ErrorResponse xmlns="${NS}"><Error><Type>Sender</Type><Code>InvalidAction</Code><Message>the stand-in does not model ${xml(String(action))}</Message></Error><RequestId>${requestId}</RequestId></ErrorResponse>`,
        );
      }
      if (name !== stack.StackName && name !== stack.StackId) {
        return reply(
          400,
          `<ErrorResponse xmlns="${NS}"><Error><Type>Sender</Type><Code>ValidationError</Code><Message>Stack with id ${xml(String(name))} does not exist</Message></Error><RequestId>${requestId}</RequestId></ErrorResponse>`,
        );
      }
      const outputs = stack.Outputs.map(
        (o) =>
          `<member>${element('OutputKey', o.OutputKey)}${element('OutputValue', o.OutputValue)}${element('Description', o.Description)}${element('ExportName', o.ExportName)}</member>`,
      ).join('');
      reply(
        200,
        [
          `<DescribeStacksResponse xmlns="${NS}"><DescribeStacksResult><Stacks><member>`,
          element('StackName', stack.StackName),
          element('StackId', stack.StackId),
          element('CreationTime', createdAt),
          element('StackStatus', 'CREATE_COMPLETE'),
          `<Outputs>${outputs}</Outputs>`,
          `</member></Stacks></DescribeStacksResult><ResponseMetadata>${element('RequestId', requestId)}</ResponseMetadata></DescribeStacksResponse>`,
        ].join(''),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

// ---- CodeBuild --------------------------------------------------------------------------------

export interface StandInBuild {
  id: string;
  arn: string;
  projectName: string;
  buildStatus: string;
  buildComplete: boolean;
  startTime: number;
  endTime?: number;
  timeoutInMinutes: number;
  environmentVariables: { name: string; value: string; type: string }[];
  idempotencyToken?: string;
}

export async function startCodeBuild(options: { onStart?: (build: StandInBuild) => void } = {}) {
  const builds: StandInBuild[] = [];
  /** The ids StopBuild was asked to stop, in order. */
  const stops: string[] = [];
  const IDEMPOTENCY_MS = 5 * 60_000;
  const view = (b: StandInBuild) => ({
    id: b.id,
    arn: b.arn,
    projectName: b.projectName,
    buildStatus: b.buildStatus,
    buildComplete: b.buildComplete,
    currentPhase: b.buildComplete ? 'COMPLETED' : 'BUILD',
    startTime: b.startTime / 1000,
    ...(b.endTime ? { endTime: b.endTime / 1000 } : {}),
    timeoutInMinutes: b.timeoutInMinutes,
    environment: {
      type: 'ARM_CONTAINER',
      image: 'aws/codebuild/amazonlinux-aarch64-standard:3.0',
      computeType: 'BUILD_GENERAL1_SMALL',
      environmentVariables: b.environmentVariables,
    },
    logs: {
      groupName: 'codebuild',
      streamName: b.id.split(':')[1],
      deepLink: `https://console.aws.amazon.com/cloudwatch/home?region=${REGION}`,
    },
  });
  const server = await serve({
    StartBuild: (input: any) => {
      const variables = input.environmentVariablesOverride ?? [];
      if (input.idempotencyToken) {
        const earlier = builds.find(
          (b) => b.idempotencyToken === input.idempotencyToken && Date.now() - b.startTime < IDEMPOTENCY_MS,
        );
        if (earlier && JSON.stringify(earlier.environmentVariables) !== JSON.stringify(variables)) {
          throw new ServiceError('InvalidInputException', 'Idempotency token already used with different parameters');
        }
        if (earlier) return { build: view(earlier) };
      }
      const id = `${input.projectName}:${randomUUID()}`;
      const build: StandInBuild = {
        id,
        arn: `arn:${PARTITION}:codebuild:${REGION}:${ACCOUNT}:build/${id}`,
        projectName: input.projectName,
        buildStatus: 'IN_PROGRESS',
        buildComplete: false,
        startTime: Date.now(),
        timeoutInMinutes: input.timeoutInMinutesOverride ?? 60,
        environmentVariables: variables,
        idempotencyToken: input.idempotencyToken,
      };
      builds.push(build);
      options.onStart?.(build);
      return { build: view(build) };
    },
    BatchGetBuilds: ({ ids }: { ids: string[] }) => ({
      builds: builds.filter((b) => ids.includes(b.id)).map(view),
      buildsNotFound: ids.filter((id) => !builds.some((b) => b.id === id)),
    }),
    ListBuildsForProject: ({ projectName }: { projectName: string }) => ({
      ids: builds
        .filter((b) => b.projectName === projectName)
        .reverse()
        .map((b) => b.id),
    }),
    // A build that has ended is answered as it is (CodeBuild does not fail the request); an unknown one is not found.
    StopBuild: ({ id }: { id: string }) => {
      const build = builds.find((b) => b.id === id);
      if (!build) throw new ServiceError('ResourceNotFoundException', `Build ${id} does not exist`);
      stops.push(id);
      if (!build.buildComplete)
        Object.assign(build, { buildStatus: 'STOPPED', buildComplete: true, endTime: Date.now() });
      return { build: view(build) };
    },
  });
  return {
    ...server,
    builds,
    stops,
    /** Ends a build with `status`, as the build itself would. */
    complete(id: string, status: 'SUCCEEDED' | 'FAILED' | 'FAULT' | 'STOPPED' | 'TIMED_OUT'): StandInBuild {
      const build = builds.find((b) => b.id === id);
      if (!build) throw new Error(`no build ${id}`);
      Object.assign(build, { buildStatus: status, buildComplete: true, endTime: Date.now() });
      return build;
    },
  };
}
