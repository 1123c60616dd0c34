/**
 * `enqueue` flags derived from the job-type catalog: every string or number field of a payload
 * schema becomes a flag (its kebab-cased path), so a new job type gets flags without a CLI change.
 * A few fields get the names people expect; anything else (arrays, unions) goes through
 * `--payload <json>` or a whole job on stdin.
 */
import type * as z from 'zod/mini';
import { JOB_TYPES, JOB_TYPE_NAMES, type JobType } from '../../contract/job-types';
import { MAX_DIFF_BYTES } from '../../contract/runtime-env';
import type { FieldIssue } from '../../src/core/errors';
import { numberOption, stringOption, type OptionSpec, type OptionValues } from './command';
import { TooLargeError, unreadableReason } from '../operator/bounded-read';
import { UsageError } from './errors';

type FlagKind = 'string' | 'number' | 'file';

export interface PayloadFlag {
  readonly flag: string;
  /** Path of the field in the payload. */
  readonly path: readonly string[];
  readonly kind: FlagKind;
  /** A file flag: the most bytes its file may hold (it is read no further). */
  readonly maxBytes?: number;
  readonly types: readonly JobType[];
}

/** Names for fields whose path would make an awkward flag; null: no flag (set by the producer). */
const FLAG_NAMES: Readonly<
  Record<string, { readonly flag: string; readonly kind?: FlagKind; readonly maxBytes?: number } | null>
> = {
  'repo.url': { flag: 'repo' },
  'repo.branch': { flag: 'branch' },
  diff: { flag: 'diff-file', kind: 'file', maxBytes: MAX_DIFF_BYTES },
  diffRef: null,
  baseBranch: { flag: 'base' },
};

const kebab = (path: readonly string[]) => path.map((p) => p.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)).join('-');

/**
 * Walks the schema through its definition (`_zod.def`), which Zod Mini (the catalog's schemas) and
 * the classic API share; `instanceof` would tie this to one of them.
 */
function leafFlags(schema: z.core.$ZodType, path: readonly string[]): Omit<PayloadFlag, 'types'>[] {
  const named = FLAG_NAMES[path.join('.')];
  if (named === null) return [];
  const def = schema._zod.def;
  const unwrapped = def.type === 'optional' ? (def as z.core.$ZodOptionalDef).innerType : schema;
  // A field normalised on parse (a string piped into a transform) is a pipe: the flag carries its input.
  const unwrappedDef = unwrapped._zod.def;
  const inner = unwrappedDef.type === 'pipe' ? (unwrappedDef as z.core.$ZodPipeDef).in : unwrapped;
  const innerDef = inner._zod.def;
  if (innerDef.type === 'object') {
    return Object.entries((innerDef as z.core.$ZodObjectDef).shape).flatMap(([key, field]) =>
      leafFlags(field, [...path, key]),
    );
  }
  // def.type: string formats (z.url(), z.email()) are strings too.
  const scalar = innerDef.type;
  const kind: FlagKind | undefined = scalar === 'string' ? 'string' : scalar === 'number' ? 'number' : undefined;
  if (kind === undefined || path.length === 0) return [];
  return [
    {
      flag: named?.flag ?? kebab(path),
      path,
      kind: named?.kind ?? kind,
      ...(named?.maxBytes === undefined ? {} : { maxBytes: named.maxBytes }),
    },
  ];
}

/** Every payload flag of every job type; a flag shared by several types maps to the same field. */
export function payloadFlags(): PayloadFlag[] {
  const flags = new Map<string, PayloadFlag>();
  for (const type of JOB_TYPE_NAMES) {
    for (const leaf of leafFlags(JOB_TYPES[type].payload, [])) {
      const known = flags.get(leaf.flag);
      if (known && known.path.join('.') !== leaf.path.join('.')) {
        throw new Error(
          `flag --${leaf.flag} would mean ${known.path.join('.')} and ${leaf.path.join('.')}: add a name to FLAG_NAMES`,
        );
      }
      flags.set(leaf.flag, { ...leaf, types: [...(known?.types ?? []), type] });
    }
  }
  return [...flags.values()];
}

export function payloadOptionSpecs(flags: readonly PayloadFlag[]): Record<string, OptionSpec> {
  return Object.fromEntries(
    flags.map((f) => [
      f.flag,
      {
        type: 'string',
        valueName: f.kind === 'file' ? 'file' : f.kind === 'number' ? 'n' : 'value',
        description: `${f.types.join(', ')}: payload.${f.path.join('.')}${f.kind === 'file' ? ' (read from the file, - for stdin)' : ''}`,
      } satisfies OptionSpec,
    ]),
  );
}

function setPath(target: Record<string, unknown>, path: readonly string[], value: unknown): void {
  const [head, ...rest] = path;
  if (head === undefined) return;
  if (rest.length === 0) {
    target[head] = value;
    return;
  }
  const child = target[head];
  const next = typeof child === 'object' && child !== null ? (child as Record<string, unknown>) : {};
  target[head] = next;
  setPath(next, rest, value);
}

/**
 * The payload of a job of `type` from its flags, on top of `base` (from --payload). A flag of
 * another job type is a usage error rather than silently ignored.
 */
export async function payloadFromFlags(
  type: JobType,
  values: OptionValues,
  flags: readonly PayloadFlag[],
  base: Record<string, unknown>,
  readFileFlag: (file: string, maxBytes: number) => Promise<Uint8Array>,
  commandPath: readonly string[],
): Promise<Record<string, unknown>> {
  const payload = structuredClone(base);
  for (const flag of flags) {
    const raw = values[flag.flag];
    if (typeof raw !== 'string') continue;
    if (!flag.types.includes(type))
      throw new UsageError(`--${flag.flag} does not apply to ${type} (only ${flag.types.join(', ')})`, commandPath);
    const value =
      flag.kind === 'number'
        ? numberOption(values, flag.flag, commandPath)
        : flag.kind === 'file'
          ? await readFlagFile(flag, raw, readFileFlag, commandPath)
          : raw;
    setPath(payload, flag.path, value);
  }
  return payload;
}

/**
 * A file named by a flag, read no further than the flag's limit (a file without one is bounded by
 * the largest diff); one that cannot be read, or holds more, is a usage error naming the flag and
 * the file.
 */
async function readFlagFile(
  { flag, maxBytes = MAX_DIFF_BYTES }: PayloadFlag,
  file: string,
  readBytes: (file: string, maxBytes: number) => Promise<Uint8Array>,
  commandPath: readonly string[],
): Promise<Uint8Array> {
  try {
    return await readBytes(file, maxBytes);
  } catch (error) {
    if (error instanceof TooLargeError) throw new UsageError(`--${flag} ${file}: ${error.message}`, commandPath);
    throw new UsageError(`cannot read --${flag} ${file}: ${unreadableReason(error)}`, commandPath);
  }
}

/** A file flag's value as read (bytes) or as validated after the producer made it text. */
function isEmptyFile(value: unknown): boolean {
  return value === '' || (value instanceof Uint8Array && value.byteLength === 0);
}

/** Fields of the envelope that `enqueue` sets from its own flags. */
const ENVELOPE_FLAGS: Readonly<Record<string, string>> = {
  jobId: 'job-id',
  workspaceId: 'workspace',
  tenantId: 'tenant',
  type: 'type',
};

function valueAt(value: unknown, path: readonly string[]): unknown {
  return path.reduce<unknown>(
    (at, key) => (typeof at === 'object' && at !== null ? (at as Record<string, unknown>)[key] : undefined),
    value,
  );
}

/**
 * A validation failure in the words the user typed: each field at fault named by its flag
 * (`--base is required`, `--diff-file x.diff: the file is empty`), not by its payload path. A
 * field no flag sets (one given in --payload or on stdin) keeps its path.
 */
export function inFlagWords(
  issues: readonly FieldIssue[],
  job: Readonly<Record<string, unknown>>,
  values: OptionValues,
  flags: readonly PayloadFlag[],
): string {
  const lines = issues.map((issue) => {
    const [head, ...rest] = issue.path;
    const payloadFlag = head === 'payload' ? flags.find((f) => f.path.join('.') === rest.join('.')) : undefined;
    const flag = payloadFlag?.flag ?? ENVELOPE_FLAGS[issue.path.join('.')];
    if (flag === undefined) return `${issue.path.join('.') || 'the job'}: ${issue.message}`;
    const value = valueAt(job, issue.path);
    if (value === undefined) return `--${flag} is required`;
    if (payloadFlag?.kind === 'file' && isEmptyFile(value))
      return `--${flag} ${stringOption(values, flag) ?? ''}: the file is empty`;
    return `--${flag}: ${issue.message}`;
  });
  return [...new Set(lines)].join('; ');
}
