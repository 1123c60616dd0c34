/**
 * IAM for the assembly run, by evaluation, never by reading action names: each recorded call is
 * simulated (@cloud-copilot/iam-simulate, which evaluates identity and resource policies with every
 * condition operator) against the caller's synthesized role policies and the resource policy the
 * template gives its resource, in the run's fixed account and region. A grant counts as used when
 * a recorded call of its role is allowed by that statement alone, for that action.
 *
 * Some requests are made by AWS services for the stack and never pass through the run: a
 * CloudWatch alarm's notification to its topic (and the topic's key), EventBridge putting an event
 * it could not deliver on its target's dead-letter queue. `serviceRequests` derives them from the
 * template (every alarm, every rule target) so they are simulated the same way.
 */
import { runSimulation } from '@cloud-copilot/iam-simulate';
import type { Principal, RecordedCall } from './aws-endpoint';
import { ACCOUNT, REGION, type CloudAssembly, type PolicyDocument } from './cloud-assembly';

export interface Decision {
  readonly allowed: boolean;
  /** The simulator's result: Allowed, ImplicitlyDenied, ExplicitlyDenied. */
  readonly result: string;
  /** `<function or role> <action> on <resource>: <result>`. */
  readonly description: string;
}

/** A granted action of a role (by its base name) that no recorded call used. */
export interface UnusedGrant {
  readonly role: string;
  readonly action: string;
  /** The statement's resources, as granted. */
  readonly resources: string;
}

/** CDK's logical id without its 8-character hash: `runtestsWorkerRoleAB12CD34` -> `runtestsWorkerRole`. */
export const baseName = (logicalId: string): string => logicalId.replace(/[0-9A-F]{8}$/, '');

/** An account other than the run's. */
const OTHER_ACCOUNT = '210987654321';

export function roleLogicalIdOf(assembly: CloudAssembly, roleArn: string): string {
  const found = assembly.ofType('AWS::IAM::Role').find(([id]) => assembly.getAtt(id, 'Arn') === roleArn);
  if (!found) throw new Error(`no role of the template has the ARN ${roleArn}`);
  return found[0];
}

/** Who a call's principal is, for messages: the function a role belongs to, else the role or service. */
export function callerName(assembly: CloudAssembly, principal: Principal): string {
  if (principal.kind === 'service') return `${principal.service} (for ${principal.sourceArn})`;
  if (principal.kind === 'operator') return 'the test';
  const fn = assembly.functions().find((f) => f.roleArn === principal.roleArn);
  return fn ? `function ${baseName(fn.logicalId)}` : `role ${baseName(roleLogicalIdOf(assembly, principal.roleArn))}`;
}

async function simulate(
  identityPolicies: { name: string; policy: PolicyDocument }[],
  resourcePolicy: PolicyDocument | undefined,
  principal: string,
  action: string,
  resource: string,
  context: Record<string, string | string[]>,
): Promise<string> {
  const response = await runSimulation(
    {
      identityPolicies: identityPolicies as never,
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      ...(resourcePolicy ? { resourcePolicy: resourcePolicy as never } : {}),
      request: {
        action,
        principal,
        resource: {
          accountId: resource.startsWith('arn:aws:s3:::') ? ACCOUNT : resource.split(':')[4] || ACCOUNT,
          resource,
        },
        contextVariables: context,
      },
    },
    {},
  );
  if (response.resultType === 'error') return `simulation error: ${JSON.stringify(response.errors)}`;
  return response.resultType === 'single'
    ? (response.result.analysis?.result ?? 'no analysis')
    : response.overallResult;
}

/** One request of a role or service principal on one resource, against every policy of the template that applies. */
export async function decideRequest(
  assembly: CloudAssembly,
  principal: Exclude<Principal, { kind: 'operator' }>,
  action: string,
  resource: string,
  context: Readonly<Record<string, string | string[]>>,
): Promise<Decision> {
  const identity =
    principal.kind === 'role' ? assembly.identityPolicies(roleLogicalIdOf(assembly, principal.roleArn)) : [];
  // A service principal acting for a resource carries the resource and the account that owns it
  // (aws:SourceArn, aws:SourceAccount); a role carries its account.
  const own: Record<string, string> =
    principal.kind === 'service'
      ? { 'aws:SourceArn': principal.sourceArn, 'aws:SourceAccount': principal.sourceArn.split(':')[4] || ACCOUNT }
      : { 'aws:PrincipalAccount': ACCOUNT };
  const result = await simulate(
    identity,
    assembly.resourcePolicyOf(resource),
    principal.kind === 'role' ? principal.roleArn : principal.service,
    action,
    resource,
    { ...own, ...context },
  );
  return {
    allowed: result === 'Allowed',
    result,
    description: `${callerName(assembly, principal)} ${action} on ${resource}: ${result}`,
  };
}

/** Every recorded call of a role or a service principal, each resource of it, simulated. */
export async function decide(assembly: CloudAssembly, calls: readonly RecordedCall[]): Promise<Decision[]> {
  const decisions: Decision[] = [];
  for (const call of calls) {
    const { principal } = call;
    if (principal.kind === 'operator') continue;
    for (const resource of call.resources)
      decisions.push(await decideRequest(assembly, principal, call.action, resource, call.context));
  }
  return decisions;
}

/** Every granted action no recorded call used, by role. */
export async function unusedGrants(assembly: CloudAssembly, calls: readonly RecordedCall[]): Promise<UnusedGrant[]> {
  const unused: UnusedGrant[] = [];
  for (const [roleId] of assembly.ofType('AWS::IAM::Role')) {
    const roleArn = assembly.getAtt(roleId, 'Arn');
    const own = calls.filter((c) => c.principal.kind === 'role' && c.principal.roleArn === roleArn);
    for (const { policy } of assembly.identityPolicies(roleId)) {
      for (const statement of policy.Statement) {
        const actions: string[] = [statement['Action']].flat();
        for (const action of actions) {
          const alone: PolicyDocument = { Version: '2012-10-17', Statement: [{ ...statement, Action: action }] };
          let used = false;
          for (const call of own) {
            for (const resource of call.resources) {
              if (
                (await simulate(
                  [{ name: 'alone', policy: alone }],
                  undefined,
                  roleArn,
                  call.action,
                  resource,
                  call.context,
                )) === 'Allowed'
              )
                used = true;
            }
            if (used) break;
          }
          if (!used)
            unused.push({ role: baseName(roleId), action, resources: [statement['Resource']].flat().join(',') });
        }
      }
    }
  }
  return unused;
}

/** A request an AWS service makes for the stack, derived from the template (see the header). */
export interface ServiceRequest {
  readonly principal: Extract<Principal, { kind: 'service' }>;
  readonly action: string;
  readonly resource: string;
  /** What makes the request, for messages: `alarm <name>`, `rule <name>'s dead-letter queue`. */
  readonly for: string;
}

/**
 * Every request a CloudWatch alarm of the template makes when it changes state: sns:Publish of
 * each action that is a topic of the template, and, for a topic encrypted with a key of the
 * template, the key's data key and decryption (what SNS asks of KMS for the alarm's message).
 */
export function alarmNotifications(assembly: CloudAssembly): ServiceRequest[] {
  const topics = new Map(
    assembly
      .ofType('AWS::SNS::Topic')
      .map(([id, topic]) => [assembly.ref(id), assembly.resolve(topic.Properties?.['KmsMasterKeyId'])]),
  );
  return assembly.ofType('AWS::CloudWatch::Alarm').flatMap(([id, alarm]) => {
    const p = assembly.resolve(alarm.Properties ?? {});
    const principal = {
      kind: 'service',
      service: 'cloudwatch.amazonaws.com',
      sourceArn: assembly.getAtt(id, 'Arn'),
    } as const;
    const actions: string[] = [...(p.AlarmActions ?? []), ...(p.OKActions ?? []), ...(p.InsufficientDataActions ?? [])];
    return [...new Set(actions)]
      .filter((arn) => topics.has(arn))
      .flatMap((topic): ServiceRequest[] => {
        const key = topics.get(topic) as string | undefined;
        return [
          { principal, action: 'sns:Publish', resource: topic, for: `alarm ${baseName(id)}` },
          ...(key
            ? ['kms:GenerateDataKey', 'kms:Decrypt'].map((action) => ({
                principal,
                action,
                resource: key,
                for: `alarm ${baseName(id)}`,
              }))
            : []),
        ];
      });
  });
}

/** Every rule target's dead-letter queue: EventBridge sends there what it could not deliver, as the rule. */
export function ruleDeadLetters(assembly: CloudAssembly): ServiceRequest[] {
  return assembly.ofType('AWS::Events::Rule').flatMap(([id, rule]) => {
    const targets: { DeadLetterConfig?: { Arn: string } }[] = assembly.resolve(rule.Properties?.['Targets'] ?? []);
    const principal = {
      kind: 'service',
      service: 'events.amazonaws.com',
      sourceArn: assembly.getAtt(id, 'Arn'),
    } as const;
    return targets.flatMap((t) =>
      t.DeadLetterConfig
        ? [
            {
              principal,
              action: 'sqs:SendMessage',
              resource: t.DeadLetterConfig.Arn,
              for: `rule ${baseName(id)}'s dead-letter queue`,
            },
          ]
        : [],
    );
  });
}

/** The same service acting for a resource of the same name in another account. */
export function fromAnotherAccount(
  principal: Extract<Principal, { kind: 'service' }>,
): Extract<Principal, { kind: 'service' }> {
  return {
    ...principal,
    sourceArn: principal.sourceArn.replace(`:${REGION}:${ACCOUNT}:`, `:${REGION}:${OTHER_ACCOUNT}:`),
  };
}

/** An ARN of another resource of the same service and account (a rule the stack does not have, ...). */
export function anotherResource(arn: string): string {
  return arn.replace(/([/:])([^/:]+)$/, '$1not-of-this-stack');
}
