/**
 * Reading a synthesized CloudFormation template as plain JSON: resources by type, what a `Ref` or
 * `Fn::GetAtt` points at, and a readable name for any resource value. The infrastructure rules
 * (template-rules.ts) are written against this, so they run as well on a template a test has
 * deliberately broken.
 */

export interface CfnResource {
  Type: string;
  // Template properties are open-ended JSON: the rules narrow what they read.
  Properties?: Record<string, any>;
  DeletionPolicy?: string;
  UpdateReplacePolicy?: string;
  DependsOn?: string | string[];
}

export interface TemplateJson {
  Resources: Record<string, CfnResource>;
  Outputs?: Record<string, { Value: unknown }>;
}

export function resourcesOf(t: TemplateJson, type: string): [string, CfnResource][] {
  return Object.entries(t.Resources).filter(([, r]) => r.Type === type);
}

/** The logical id a `{ Ref }` or `{ Fn::GetAtt: [id, attr] }` points at, if any. */
export function targetOf(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as { Ref?: unknown; 'Fn::GetAtt'?: unknown };
  if (typeof v.Ref === 'string') return v.Ref;
  const getAtt = v['Fn::GetAtt'];
  return Array.isArray(getAtt) && typeof getAtt[0] === 'string' ? getAtt[0] : undefined;
}

/** The resource a reference points at; throws naming the reference when it points nowhere. */
export function resolve(t: TemplateJson, value: unknown): [string, CfnResource] {
  const id = targetOf(value);
  const resource = id === undefined ? undefined : t.Resources[id];
  if (id === undefined || !resource)
    throw new Error(`${JSON.stringify(value)} does not point at a resource of the template`);
  return [id, resource];
}

/** A logical id without CDK's 8-character hash: `sequencerQueueDlq7A802D4D` -> `sequencerQueueDlq`. */
export function baseName(logicalId: string): string {
  return logicalId.replace(/[0-9A-F]{8}$/, '');
}

/**
 * A readable, stable rendering of a resource value (an ARN, a Ref, a join): references become the
 * base name of what they point at, pseudo parameters `${AWS::Region}`, literals stay as they are.
 * `{ Fn::Join: ['', [{ Fn::GetAtt: [LedgerTable9343E4AA, Arn] }, '/index/byWorkspace']] }` is
 * `LedgerTable/index/byWorkspace`.
 */
export function render(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  const v = value as { Ref?: unknown; 'Fn::Join'?: unknown };
  if (typeof v.Ref === 'string' && v.Ref.startsWith('AWS::')) return `\${${v.Ref}}`;
  const target = targetOf(value);
  if (target !== undefined) return baseName(target);
  const join = v['Fn::Join'];
  if (Array.isArray(join) && typeof join[0] === 'string' && Array.isArray(join[1]))
    return join[1].map(render).join(join[0]);
  return JSON.stringify(value);
}

export function asArray<T>(value: T | T[] | undefined): T[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

export function clone(t: TemplateJson): TemplateJson {
  return structuredClone(t);
}
