/**
 * The cloud assembly as the assembly run reads it: the synthesized template and the assets in
 * `cdk.out`, with every intrinsic resolved to the physical names and ARNs the run gives its local
 * resources, in one fixed account and region. Nothing here knows the platform: functions, event
 * source mappings, rules, queues, the table, the bucket and every policy are found by their
 * CloudFormation types, so a new function or grant in the stack is picked up without a change here.
 *
 * Physical names follow CloudFormation's pattern (`<stack>-<logical id>-<suffix>`, `.fifo` kept,
 * lower case for a bucket); an intrinsic or attribute the run does not know throws naming it.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const ACCOUNT = '123456789012';
export const REGION = 'eu-west-1';
export const PARTITION = 'aws';

// Template values are open-ended JSON: readers below narrow what they take.
type Json = any;

export interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, Json>;
}

export interface AssemblyFunction {
  readonly logicalId: string;
  readonly name: string;
  readonly arn: string;
  /** Folder of its asset in cdk.out: LAMBDA_TASK_ROOT. */
  readonly codeDir: string;
  readonly handler: string;
  readonly runtime: string;
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
  readonly ephemeralStorageMb: number;
  /** The template's Environment.Variables, every intrinsic resolved. */
  readonly environment: Readonly<Record<string, string>>;
  readonly roleLogicalId: string;
  readonly roleArn: string;
  readonly logGroupName: string;
}

export interface EventSourceMapping {
  readonly functionLogicalId: string;
  readonly queueLogicalId: string;
  readonly batchSize: number;
  readonly maximumConcurrency: number;
  readonly functionResponseTypes: readonly string[];
}

export interface PolicyDocument {
  readonly Version?: string;
  readonly Statement: readonly Record<string, Json>[];
}

const DEFAULT_LAMBDA_TIMEOUT = 3;
const DEFAULT_LAMBDA_MEMORY = 128;
const DEFAULT_EPHEMERAL_STORAGE = 512;

interface Template {
  readonly Resources: Record<string, CfnResource>;
  readonly Outputs?: Record<string, { Value: Json; Description?: string; Export?: { Name: Json } }>;
  readonly Conditions?: Record<string, Json>;
}

export class CloudAssembly {
  readonly resources: Readonly<Record<string, CfnResource>>;
  private readonly template: Template;

  constructor(
    readonly outdir: string,
    readonly stackName: string,
    template?: Template,
  ) {
    this.template = template ?? JSON.parse(readFileSync(join(outdir, `${stackName}.template.json`), 'utf8'));
    this.resources = this.template.Resources;
  }

  /** A copy whose template a test changed (the assets stay those of `outdir`, or of `outdir` given). */
  withTemplate(mutate: (resources: Record<string, CfnResource>) => void, outdir = this.outdir): CloudAssembly {
    const resources = structuredClone(this.resources) as Record<string, CfnResource>;
    mutate(resources);
    return new CloudAssembly(outdir, this.stackName, { ...this.template, Resources: resources });
  }

  /** The stack's outputs as DescribeStacks lists them once deployed: every value resolved. */
  outputs(): { OutputKey: string; OutputValue: string; Description?: string; ExportName?: string }[] {
    return Object.entries(this.template.Outputs ?? {}).map(([key, output]) => ({
      OutputKey: key,
      OutputValue: String(this.resolve(output.Value)),
      ...(output.Description ? { Description: output.Description } : {}),
      ...(output.Export ? { ExportName: String(this.resolve(output.Export.Name)) } : {}),
    }));
  }

  /** The stack's id: its ARN, `stack/<name>/<uuid>` as CloudFormation gives it. */
  get stackId(): string {
    const hex = createHash('sha256').update(this.stackName).digest('hex');
    return `arn:${PARTITION}:cloudformation:${REGION}:${ACCOUNT}:stack/${this.stackName}/${[hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20, 32)].join('-')}`;
  }

  ofType(type: string): [string, CfnResource][] {
    return Object.entries(this.resources).filter(([, r]) => r.Type === type);
  }

  resource(logicalId: string): CfnResource {
    const found = this.resources[logicalId];
    if (!found) throw new Error(`the template has no resource ${logicalId}`);
    return found;
  }

  // ---- physical identities ---------------------------------------------------------------------

  /** The name CloudFormation generates for a resource without an explicit one. */
  physicalName(logicalId: string): string {
    const resource = this.resource(logicalId);
    const suffix = createHash('sha256')
      .update(`${this.stackName}/${logicalId}`)
      .digest('hex')
      .slice(0, 12)
      .toUpperCase();
    const props = resource.Properties ?? {};
    switch (resource.Type) {
      case 'AWS::SQS::Queue':
        return `${this.stackName}-${logicalId}-${suffix}`.slice(0, 75) + (props['FifoQueue'] ? '.fifo' : '');
      case 'AWS::S3::Bucket':
        return `${this.stackName}-${logicalId}-${suffix}`.toLowerCase().slice(0, 63);
      case 'AWS::SecretsManager::Secret':
        return `${logicalId}-${suffix}`;
      case 'AWS::KMS::Key':
        return [suffix.slice(0, 8), suffix.slice(8, 12), '4000', '8000', suffix.padEnd(12, '0')]
          .join('-')
          .toLowerCase();
      default:
        return `${this.stackName}-${logicalId}-${suffix}`.slice(0, 64);
    }
  }

  /** `{ Ref }` of a resource. */
  ref(logicalId: string): string {
    const name = this.physicalName(logicalId);
    switch (this.resource(logicalId).Type) {
      case 'AWS::SQS::Queue':
        return `https://sqs.${REGION}.amazonaws.com/${ACCOUNT}/${name}`;
      case 'AWS::SecretsManager::Secret':
        return `arn:${PARTITION}:secretsmanager:${REGION}:${ACCOUNT}:secret:${name.replace(/-([A-Z0-9]{6})[A-Z0-9]*$/, '-$1')}`;
      case 'AWS::SNS::Topic':
        return `arn:${PARTITION}:sns:${REGION}:${ACCOUNT}:${name}`;
      default:
        return name;
    }
  }

  /** `{ Fn::GetAtt: [logicalId, attribute] }`. */
  getAtt(logicalId: string, attribute: string): string {
    const type = this.resource(logicalId).Type;
    const name = this.physicalName(logicalId);
    const arn = (service: string, resource: string, region = REGION, account = ACCOUNT) =>
      `arn:${PARTITION}:${service}:${region}:${account}:${resource}`;
    const table: Record<string, Record<string, () => string>> = {
      'AWS::SQS::Queue': { Arn: () => arn('sqs', name), QueueName: () => name, QueueUrl: () => this.ref(logicalId) },
      'AWS::DynamoDB::Table': { Arn: () => arn('dynamodb', `table/${name}`) },
      'AWS::S3::Bucket': { Arn: () => `arn:${PARTITION}:s3:::${name}`, DomainName: () => `${name}.s3.amazonaws.com` },
      'AWS::Events::EventBus': { Arn: () => arn('events', `event-bus/${name}`), Name: () => name },
      'AWS::Events::Rule': { Arn: () => arn('events', `rule/${name}`) },
      'AWS::CodeBuild::Project': { Arn: () => arn('codebuild', `project/${name}`) },
      'AWS::Logs::LogGroup': { Arn: () => arn('logs', `log-group:${name}:*`) },
      'AWS::SNS::Topic': { TopicArn: () => this.ref(logicalId), TopicName: () => name },
      'AWS::KMS::Key': { Arn: () => arn('kms', `key/${name}`), KeyId: () => name },
      'AWS::Lambda::Function': { Arn: () => arn('lambda', `function:${name}`) },
      'AWS::IAM::Role': {
        Arn: () => `arn:${PARTITION}:iam::${ACCOUNT}:role/${name}`,
        RoleId: () => `AROA${name.slice(-12)}`,
      },
      'AWS::SecretsManager::Secret': { Id: () => this.ref(logicalId) },
      'AWS::CloudWatch::Alarm': { Arn: () => arn('cloudwatch', `alarm:${name}`) },
    };
    const read = table[type]?.[attribute];
    if (!read) throw new Error(`the assembly run does not know the attribute ${attribute} of ${type} (${logicalId})`);
    return read();
  }

  /** A template value with every intrinsic resolved. */
  resolve(value: Json): Json {
    if (Array.isArray(value)) return value.map((v) => this.resolve(v));
    if (typeof value !== 'object' || value === null) return value;
    const keys = Object.keys(value);
    if (keys.length === 1 && (keys[0] === 'Ref' || keys[0] === 'Condition' || keys[0]!.startsWith('Fn::')))
      return this.intrinsic(keys[0]!, value[keys[0]!]);
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.resolve(v)]));
  }

  private pseudo(name: string): string | undefined {
    const values: Record<string, string> = {
      'AWS::AccountId': ACCOUNT,
      'AWS::Region': REGION,
      'AWS::Partition': PARTITION,
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::StackName': this.stackName,
    };
    return values[name];
  }

  private intrinsic(name: string, args: Json): Json {
    switch (name) {
      case 'Ref':
        return this.pseudo(args) ?? this.ref(args);
      case 'Fn::GetAtt': {
        const [id, attribute] = typeof args === 'string' ? args.split('.') : args;
        return this.getAtt(id, attribute);
      }
      case 'Fn::Join':
        return (this.resolve(args[1]) as string[]).join(args[0]);
      case 'Fn::Select':
        return (this.resolve(args[1]) as Json[])[Number(this.resolve(args[0]))];
      case 'Fn::Split':
        return String(this.resolve(args[1])).split(args[0]);
      case 'Fn::Sub': {
        const [text, vars] = typeof args === 'string' ? [args, {}] : [args[0], this.resolve(args[1])];
        return (text as string).replace(/\$\{([^}!][^}]*)\}/g, (_, ref: string) => {
          if (ref in vars) return vars[ref];
          if (this.pseudo(ref) !== undefined) return this.pseudo(ref)!;
          const [id, attribute] = ref.split('.');
          return attribute ? this.getAtt(id!, attribute) : this.ref(id!);
        });
      }
      // Conditions (a region's choices: lib/regions.ts), evaluated here for the run's region.
      case 'Fn::If': {
        const [condition, whenTrue, whenFalse] = args as [string, Json, Json];
        return this.resolve(this.condition(condition) ? whenTrue : whenFalse);
      }
      case 'Fn::Equals': {
        const [a, b] = (args as Json[]).map((v) => this.resolve(v));
        return JSON.stringify(a) === JSON.stringify(b);
      }
      case 'Fn::Or':
        return (args as Json[]).some((v) => this.resolve(v) === true);
      case 'Fn::And':
        return (args as Json[]).every((v) => this.resolve(v) === true);
      case 'Fn::Not':
        return this.resolve((args as Json[])[0]) !== true;
      case 'Condition':
        return this.condition(args as string);
      default:
        throw new Error(`the assembly run does not resolve the intrinsic ${name}`);
    }
  }

  private condition(name: string): boolean {
    const definition = this.template.Conditions?.[name];
    if (definition === undefined) throw new Error(`the template has no condition ${name}`);
    return this.resolve(definition) === true;
  }

  // ---- what the run wires ----------------------------------------------------------------------

  functions(): AssemblyFunction[] {
    return this.ofType('AWS::Lambda::Function').map(([logicalId, fn]) => {
      const p = fn.Properties ?? {};
      const key = String(p['Code']?.S3Key ?? '');
      const codeDir = join(this.outdir, `asset.${key.replace(/\.zip$/, '')}`);
      if (!key || !existsSync(codeDir))
        throw new Error(`${logicalId}: its code asset ${key || '(none)'} is not in ${this.outdir}`);
      const roleLogicalId = Object.values(p['Role'] as Record<string, string[]>)[0]![0]!;
      return {
        logicalId,
        name: this.ref(logicalId),
        arn: this.getAtt(logicalId, 'Arn'),
        codeDir,
        handler: p['Handler'],
        runtime: p['Runtime'],
        timeoutSeconds: p['Timeout'] ?? DEFAULT_LAMBDA_TIMEOUT,
        memoryMb: p['MemorySize'] ?? DEFAULT_LAMBDA_MEMORY,
        ephemeralStorageMb: p['EphemeralStorage']?.Size ?? DEFAULT_EPHEMERAL_STORAGE,
        environment: this.resolve(p['Environment']?.Variables ?? {}),
        roleLogicalId,
        roleArn: this.getAtt(roleLogicalId, 'Arn'),
        logGroupName: p['LoggingConfig']?.LogGroup
          ? this.resolve(p['LoggingConfig'].LogGroup)
          : `/aws/lambda/${this.ref(logicalId)}`,
      };
    });
  }

  eventSourceMappings(): EventSourceMapping[] {
    return this.ofType('AWS::Lambda::EventSourceMapping').map(([id, m]) => {
      const p = m.Properties ?? {};
      const queue = p['EventSourceArn']?.['Fn::GetAtt']?.[0];
      if (!queue) throw new Error(`${id}: the assembly run feeds event source mappings of SQS queues only`);
      return {
        functionLogicalId: p['FunctionName'].Ref ?? p['FunctionName']['Fn::GetAtt'][0],
        queueLogicalId: queue,
        batchSize: p['BatchSize'] ?? 10,
        maximumConcurrency: p['ScalingConfig']?.MaximumConcurrency ?? 1000,
        functionResponseTypes: p['FunctionResponseTypes'] ?? [],
      };
    });
  }

  /** The identity policies of a role: its own inline ones and every AWS::IAM::Policy attached to it. */
  identityPolicies(roleLogicalId: string): { name: string; policy: PolicyDocument }[] {
    const role = this.resource(roleLogicalId).Properties ?? {};
    if ((role['ManagedPolicyArns'] ?? []).length > 0)
      throw new Error(`${roleLogicalId}: managed policies cannot be read from the template`);
    const inline = (role['Policies'] ?? []).map((p: Json) => ({
      name: p.PolicyName,
      policy: this.resolve(p.PolicyDocument),
    }));
    const attached = this.ofType('AWS::IAM::Policy')
      .filter(([, p]) => (p.Properties?.['Roles'] ?? []).some((r: Json) => r.Ref === roleLogicalId))
      .map(([id, p]) => ({ name: id, policy: this.resolve(p.Properties!['PolicyDocument']) }));
    return [...inline, ...attached];
  }

  /** The resource policy of the resource with this ARN, if the template gives it one. */
  resourcePolicyOf(arn: string): PolicyDocument | undefined {
    const holders: [string, string, (p: Record<string, Json>) => Json[]][] = [
      ['AWS::SQS::QueuePolicy', 'PolicyDocument', (p) => p['Queues']],
      ['AWS::SNS::TopicPolicy', 'PolicyDocument', (p) => p['Topics']],
      ['AWS::S3::BucketPolicy', 'PolicyDocument', (p) => [p['Bucket']]],
    ];
    const arnsOf = (ref: Json): string[] => {
      const id = ref?.Ref;
      if (!id) return [this.resolve(ref)];
      const type = this.resource(id).Type;
      if (type === 'AWS::SQS::Queue') return [this.getAtt(id, 'Arn')];
      if (type === 'AWS::S3::Bucket') return [this.getAtt(id, 'Arn')];
      return [this.ref(id)];
    };
    const statements: Record<string, Json>[] = [];
    for (const [type, field, targets] of holders) {
      for (const [, holder] of this.ofType(type)) {
        const p = holder.Properties ?? {};
        const owners = targets(p).flatMap(arnsOf);
        if (owners.some((owner) => arn === owner || arn.startsWith(`${owner}/`)))
          statements.push(...this.resolve(p[field]).Statement);
      }
    }
    for (const [id, key] of this.ofType('AWS::KMS::Key'))
      if (this.getAtt(id, 'Arn') === arn) statements.push(...this.resolve(key.Properties!['KeyPolicy']).Statement);
    for (const [, permission] of this.ofType('AWS::Lambda::Permission')) {
      const p = this.resolve(permission.Properties);
      if (p.FunctionName === arn || this.functions().some((f) => f.arn === arn && f.name === p.FunctionName)) {
        statements.push({
          Effect: 'Allow',
          Principal: { Service: p.Principal },
          Action: p.Action,
          Resource: arn,
          ...(p.SourceArn ? { Condition: { ArnLike: { 'aws:SourceArn': p.SourceArn } } } : {}),
        });
      }
    }
    return statements.length > 0 ? { Version: '2012-10-17', Statement: statements } : undefined;
  }
}
