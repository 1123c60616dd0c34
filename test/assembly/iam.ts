/**
 * IAM for the assembly run, by evaluation, never by reading action names: each recorded call is
 * simulated (@cloud-copilot/iam-simulate, which evaluates identity and resource policies with every
 * condition operator) against the caller's synthesized role policies and the resource policy the
 * template gives its resource, in the run's fixed account and region. A grant counts as used when
 * a recorded call of its role is allowed by that statement alone, for that action.
 */
import { runSimulation } from '@cloud-copilot/iam-simulate';
import type { RecordedCall } from './aws-endpoint';
import { ACCOUNT, type CloudAssembly, type PolicyDocument } from './cloud-assembly';

export interface Decision {
  readonly allowed: boolean;
  /** `<function or role> <action> on <resource>: <result>`. */
  readonly description: string;
}

/** CDK's logical id without its 8-character hash: `runtestsWorkerRoleAB12CD34` -> `runtestsWorkerRole`. */
export const baseName = (logicalId: string): string => logicalId.replace(/[0-9A-F]{8}$/, '');

export function roleLogicalIdOf(assembly: CloudAssembly, roleArn: string): string {
  const found = assembly.ofType('AWS::IAM::Role').find(([id]) => assembly.getAtt(id, 'Arn') === roleArn);
  if (!found) throw new Error(`no role of the template has the ARN ${roleArn}`);
  return found[0];
}

/** Who a call's principal is, for messages: the function a role belongs to, else the role or service. */
export function callerName(assembly: CloudAssembly, call: RecordedCall): string {
  if (call.principal.kind === 'service') return `${call.principal.service} (for ${call.principal.sourceArn})`;
  if (call.principal.kind === 'operator') return 'the test';
  const roleArn = call.principal.roleArn;
  const fn = assembly.functions().find((f) => f.roleArn === roleArn);
  return fn ? `function ${baseName(fn.logicalId)}` : `role ${baseName(roleLogicalIdOf(assembly, roleArn))}`;
}

async function simulate(identityPolicies: { name: string; policy: PolicyDocument }[], resourcePolicy: PolicyDocument | undefined, principal: string, action: string, resource: string, context: Record<string, string | string[]>): Promise<string> {
  const response = await runSimulation({
    identityPolicies: identityPolicies as never,
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    ...(resourcePolicy ? { resourcePolicy: resourcePolicy as never } : {}),
    request: { action, principal, resource: { accountId: resource.startsWith('arn:aws:s3:::') ? ACCOUNT : resource.split(':')[4] || ACCOUNT, resource }, contextVariables: context },
  }, {});
  if (response.resultType === 'error') return `simulation error: ${JSON.stringify(response.errors)}`;
  return response.resultType === 'single' ? response.result.analysis?.result ?? 'no analysis' : response.overallResult;
}

/** Every recorded call of a role or a service principal, each resource of it, simulated. */
export async function decide(assembly: CloudAssembly, calls: readonly RecordedCall[]): Promise<Decision[]> {
  const decisions: Decision[] = [];
  for (const call of calls) {
    if (call.principal.kind === 'operator') continue;
    const principal = call.principal.kind === 'role' ? call.principal.roleArn : call.principal.service;
    const identity = call.principal.kind === 'role' ? assembly.identityPolicies(roleLogicalIdOf(assembly, call.principal.roleArn)) : [];
    const context = { ...call.context, ...(call.principal.kind === 'service' ? { 'aws:SourceArn': call.principal.sourceArn, 'aws:SourceAccount': ACCOUNT } : { 'aws:PrincipalAccount': ACCOUNT }) };
    for (const resource of call.resources) {
      const result = await simulate(identity, assembly.resourcePolicyOf(resource), principal, call.action, resource, context);
      decisions.push({ allowed: result === 'Allowed', description: `${callerName(assembly, call)} ${call.action} on ${resource}: ${result}` });
    }
  }
  return decisions;
}

/** `<role base name> <action> <resource as granted>` of every granted action no recorded call used. */
export async function unusedGrants(assembly: CloudAssembly, calls: readonly RecordedCall[]): Promise<string[]> {
  const unused: string[] = [];
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
              if ((await simulate([{ name: 'alone', policy: alone }], undefined, roleArn, call.action, resource, call.context)) === 'Allowed') used = true;
            }
            if (used) break;
          }
          if (!used) unused.push(`${baseName(roleId)} ${action} ${[statement['Resource']].flat().join(',')}`);
        }
      }
    }
  }
  return unused;
}
