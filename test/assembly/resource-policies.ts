/**
 * The resource policies of the template, checked for the services that use them (iam.ts simulates):
 * each check returns what is wrong, as `<who> <action> on <resource>: <result>` lines, so that a
 * test asserts none on the template and some on a copy broken on purpose. Each pairs the requests
 * a policy must allow with the ones it must refuse: a policy that allowed everything would pass
 * the first half alone.
 */
import { ENV } from '../../contract/runtime-env';
import type { Principal, RecordedCall } from './aws-endpoint';
import { ACCOUNT, PARTITION, REGION, type CloudAssembly } from './cloud-assembly';
import {
  alarmNotifications,
  anotherResource,
  decide,
  decideRequest,
  fromAnotherAccount,
  ruleDeadLetters,
  type Decision,
} from './iam';

const TLS = { 'aws:SecureTransport': 'true' };
type ServicePrincipal = Extract<Principal, { kind: 'service' }>;

const refusedWhenAllowed = (d: Decision) => (d.allowed ? [`${d.description} (must be refused)`] : []);
const allowedWhenRefused = (d: Decision) => (d.allowed ? [] : [d.description]);

/** Every alarm of the template notifies its topic through the topic's key; no alarm of another account does. */
export async function alarmProblems(assembly: CloudAssembly): Promise<string[]> {
  const requests = alarmNotifications(assembly);
  const silent = assembly
    .ofType('AWS::CloudWatch::Alarm')
    .filter(([id]) => !requests.some((r) => r.principal.sourceArn === assembly.getAtt(id, 'Arn')));
  const problems = silent.map(([id]) => `alarm ${id} notifies no topic of the template`);
  for (const r of requests) {
    problems.push(...allowedWhenRefused(await decideRequest(assembly, r.principal, r.action, r.resource, TLS)));
    problems.push(
      ...refusedWhenAllowed(await decideRequest(assembly, fromAnotherAccount(r.principal), r.action, r.resource, TLS)),
    );
  }
  return problems;
}

/** Every recorded call on a queue or a bucket of the template: allowed over TLS, explicitly refused over plain HTTP. */
export async function plainHttpProblems(assembly: CloudAssembly, calls: readonly RecordedCall[]): Promise<string[]> {
  const guarded = new Set(
    [...assembly.ofType('AWS::S3::Bucket'), ...assembly.ofType('AWS::SQS::Queue')].map(([id]) =>
      assembly.getAtt(id, 'Arn'),
    ),
  );
  const onGuarded = calls.filter(
    (c) => c.principal.kind !== 'operator' && c.resources.some((r) => guarded.has(r.replace(/\/.*$/, ''))),
  );
  const unused = assembly
    .ofType('AWS::S3::Bucket')
    .filter(([id]) => !onGuarded.some((c) => c.resources.some((r) => r.startsWith(assembly.getAtt(id, 'Arn')))));
  const plain = await decide(
    assembly,
    onGuarded.map((c) => ({ ...c, context: { ...c.context, 'aws:SecureTransport': 'false' } })),
  );
  return [
    ...unused.map(([id]) => `bucket ${id}: no recorded call to replay`),
    ...(await decide(assembly, onGuarded)).flatMap(allowedWhenRefused),
    ...plain.flatMap((d) =>
      d.result === 'ExplicitlyDenied' ? [] : [`${d.description} over plain HTTP (must be explicitly refused)`],
    ),
  ];
}

/** EventBridge's deliveries (recorded) and dead-letter sends (derived) of each rule: allowed for that rule, refused for another. */
export async function ruleDeliveryProblems(assembly: CloudAssembly, calls: readonly RecordedCall[]): Promise<string[]> {
  const deliveries = calls.flatMap((c) =>
    c.principal.kind === 'service' && c.principal.service === 'events.amazonaws.com'
      ? c.resources.map((resource) => ({ principal: c.principal as ServicePrincipal, action: c.action, resource }))
      : [],
  );
  const problems: string[] = [];
  for (const r of [...deliveries, ...ruleDeadLetters(assembly)]) {
    problems.push(...allowedWhenRefused(await decideRequest(assembly, r.principal, r.action, r.resource, TLS)));
    problems.push(
      ...refusedWhenAllowed(
        await decideRequest(
          assembly,
          { ...r.principal, sourceArn: anotherResource(r.principal.sourceArn) },
          r.action,
          r.resource,
          TLS,
        ),
      ),
    );
  }
  return problems;
}

/**
 * Each CodeBuild project's buildspec names no secret, and its role reads no secret of the template
 * (the operator's: push, read-only, token) but does read the checkout secrets under the prefix the
 * command stages write them to (CHECKOUT_SECRET_PREFIX in their environment).
 */
export async function buildSecretProblems(assembly: CloudAssembly): Promise<string[]> {
  const prefixes = new Set(assembly.functions().flatMap((f) => f.environment[ENV.checkoutSecretPrefix] ?? []));
  const secrets = assembly.ofType('AWS::SecretsManager::Secret').map(([id]) => assembly.ref(id));
  const problems =
    prefixes.size === 0 ? ['no function names a checkout secret prefix (the builds would have no credential)'] : [];
  for (const [id, project] of assembly.ofType('AWS::CodeBuild::Project')) {
    const p = assembly.resolve(project.Properties);
    const named = Object.values<string>(JSON.parse(p.Source.BuildSpec).env?.['secrets-manager'] ?? {});
    problems.push(...named.map((reference) => `project ${id}'s buildspec names the secret ${reference}`));
    const principal = { kind: 'role', name: id, roleArn: p.ServiceRole } as const;
    for (const secret of secrets) {
      const decision = await decideRequest(assembly, principal, 'secretsmanager:GetSecretValue', secret, TLS);
      if (decision.allowed) problems.push(`${decision.description} (an operator's secret)`);
    }
    for (const prefix of prefixes) {
      const checkout = `arn:${PARTITION}:secretsmanager:${REGION}:${ACCOUNT}:secret:${prefix}0123456789abcdef0123456789abcdef-AbCdEf`;
      const decision = await decideRequest(assembly, principal, 'secretsmanager:GetSecretValue', checkout, TLS);
      if (!decision.allowed) problems.push(`${decision.description} (a checkout secret: the build needs it)`);
    }
  }
  return problems;
}
