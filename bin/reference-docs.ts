/**
 * `npm run docs`: writes the reference pages of docs/reference/ from the code they describe: the
 * CLI's command table (the source of every `--help`), the configuration's zod schema, and the wire
 * contract's JSON Schema files (contract/schema/). test/unit/reference-docs.test.ts fails when a
 * page is not what this writes.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import * as z from 'zod';
import { allWorkers } from '../contract/job-types';
import { TUNABLE_SETTINGS, configSchema, envSetting } from '../lib/config';
import { commandHelp, globalOptionsHelp, overviewHelp } from '../tools/cli/command';
import { COMMANDS } from '../tools/cli/commands';
import { EXIT } from '../tools/cli/errors';
import { PROGRAM } from '../tools/cli/main';
import { WIRE_SCHEMA_DIR } from '../src/core/wire-schema';

/** Where the pages live, relative to the project root. */
export const REFERENCE_DIR = 'docs/reference';
const ROOT = path.join(__dirname, '..');
/** From a page to the project root. */
const UP = '../../';

/** The part of JSON Schema the documents use. */
export interface JsonSchema {
  readonly title?: string;
  readonly description?: string;
  readonly type?: string;
  readonly const?: unknown;
  readonly enum?: readonly unknown[];
  readonly format?: string;
  readonly pattern?: string;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly exclusiveMinimum?: number;
  readonly items?: JsonSchema;
  readonly properties?: Readonly<Record<string, JsonSchema>>;
  readonly required?: readonly string[];
  readonly anyOf?: readonly JsonSchema[];
  readonly oneOf?: readonly JsonSchema[];
}

/** Every page: file name in REFERENCE_DIR, and its text. */
export function referencePages(): Record<string, string> {
  return { 'cli.md': cliPage(), 'configuration.md': configurationPage(), 'events.md': eventsPage() };
}

function cliPage(): string {
  const sections = COMMANDS.map((command) =>
    [`## ${PROGRAM} ${command.path.join(' ')}`, '', fence(commandHelp(command, PROGRAM, { globals: false }))].join(
      '\n',
    ),
  );
  return page([
    '# CLI reference',
    `Look up every \`${PROGRAM}\` command, its arguments and its options here: \`npm run docs\` generates this page from the command table in [tools/cli/commands/](${UP}tools/cli/commands/index.ts), the one every \`--help\` is made from.`,
    `## ${PROGRAM} --help`,
    fence(overviewHelp(COMMANDS, PROGRAM)),
    '## Global options',
    'Every command takes these.',
    fence(globalOptionsHelp()),
    '## Exit codes',
    `Scripts branch on these ([tools/cli/errors.ts](${UP}tools/cli/errors.ts)); the README's [Exit codes](${UP}README.md#exit-codes) says when each is given.`,
    table(
      ['code', 'name'],
      Object.entries(EXIT).map(([name, exit]) => [String(exit), code(name)]),
    ),
    ...sections,
  ]);
}

function configurationPage(): string {
  const schema = z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  // Defaults as the code applies them (a transformed setting's default is not in its JSON Schema).
  const defaults = configSchema.parse({}) as Record<string, unknown>;
  const workers = allWorkers();
  const tunable = schema.properties?.workers?.properties?.[workers[0]?.name ?? '']?.properties ?? {};
  const rows: string[][] = [
    [
      '`env`',
      typeText(z.toJSONSchema(envSetting, { io: 'input' }) as JsonSchema),
      code(envSetting.parse(undefined)),
      prose(envSetting.description),
    ],
    ...Object.keys(TUNABLE_SETTINGS).map((key) => [
      code(`workers.<name>.${key}`),
      typeText(tunable[key] ?? {}),
      workerDefaults(workers.map((w) => [w.name, (w.settings as unknown as Record<string, unknown>)[key]])),
      prose(tunable[key]?.description),
    ]),
    ...Object.entries(schema.properties ?? {})
      .filter(([name]) => name !== 'workers')
      .map(([name, setting]) => [
        code(name),
        typeText(setting),
        name in defaults ? code(JSON.stringify(defaults[name])) : 'none',
        prose(setting.description),
      ]),
  ];
  return page([
    '# Configuration reference',
    `Look up every setting of a deployed environment here, with its type, default and meaning: \`npm run docs\` generates this page from the schema in [lib/config.ts](${UP}lib/config.ts) that validates \`config/<env>.json\` and cdk context.`,
    'A setting goes in `config/<env>.json` or on the command line as cdk context (`-c key=value`, nested settings as dotted keys: `-c workers.sequencer.maxConcurrency=20`). A context value wins over the file, setting by setting. An unknown setting or an invalid value fails the synth, with one message naming every bad setting.',
    table(['setting', 'type', 'default', 'description'], rows),
    `\`<name>\` is a worker: ${workers.map((w) => code(w.name)).join(', ')}, and any job type you add. A worker's defaults are the job-type catalog's ([contract/job-types.ts](${UP}contract/job-types.ts)).`,
  ]);
}

/** One value when every worker has it, else each worker's. */
function workerDefaults(values: readonly (readonly [string, unknown])[]): string {
  const distinct = new Set(values.map(([, v]) => JSON.stringify(v)));
  if (distinct.size === 1) return code([...distinct][0] ?? '');
  return values.map(([name, v]) => `${name} ${JSON.stringify(v)}`).join(', ');
}

function eventsPage(): string {
  const dir = path.join(ROOT, WIRE_SCHEMA_DIR);
  const files = readdirSync(dir)
    .filter((file) => file.endsWith('.json'))
    .sort();
  const sections = files.map((file) =>
    schemaSection(file, JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as JsonSchema),
  );
  return page([
    '# Events and messages reference',
    `Look up every field of the messages a producer sends and of the events and DLQ attributes the platform publishes: \`npm run docs\` generates this page from the JSON Schema files in [${WIRE_SCHEMA_DIR}/](${UP}${WIRE_SCHEMA_DIR}/), which \`npm run schema\` makes from the code.`,
    'A field marked "yes" is required. Rules JSON Schema cannot express are in the field\'s description; the platform checks them on receipt.',
    ...sections,
  ]);
}

const FIELD_HEADINGS = ['field', 'type', 'required', 'description'];

/** A schema file: its fields, or (one form per job type or status) the fields every form shares, then each form's own. */
function schemaSection(file: string, schema: JsonSchema): string {
  const head = [
    `## ${schema.title ?? file}`,
    '',
    prose(schema.description),
    '',
    `Schema: [${file}](${UP}${WIRE_SCHEMA_DIR}/${file}).`,
  ];
  const forms = schema.oneOf;
  if (!forms) return [...head, '', table(FIELD_HEADINGS, fieldRows(schema))].join('\n');
  const shared = Object.keys(forms[0]?.properties ?? {}).filter((name) =>
    forms.every((form) => sameField(forms[0] ?? {}, form, name)),
  );
  const key = Object.keys(forms[0]?.properties ?? {}).find((name) =>
    forms.every((form) => form.properties?.[name]?.const !== undefined),
  );
  const parts = [
    ...head,
    '',
    'Fields of every form:',
    '',
    table(
      FIELD_HEADINGS,
      fieldRows(forms[0] ?? {}, '', (name) => shared.includes(name)),
    ),
  ];
  for (const form of forms) {
    const name = key === undefined ? '' : String(form.properties?.[key]?.const);
    parts.push(
      '',
      `### ${schema.title ?? file}: ${name}`,
      '',
      table(
        FIELD_HEADINGS,
        fieldRows(form, '', (field) => !shared.includes(field)),
      ),
    );
  }
  return parts.join('\n');
}

function sameField(a: JsonSchema, b: JsonSchema, name: string): boolean {
  const field = (s: JsonSchema) => JSON.stringify([s.properties?.[name], s.required?.includes(name)]);
  return b.properties?.[name] !== undefined && field(a) === field(b);
}

/** One row per field, nested objects' fields under their dotted path. */
function fieldRows(schema: JsonSchema, prefix = '', include: (name: string) => boolean = () => true): string[][] {
  return Object.entries(schema.properties ?? {})
    .filter(([name]) => include(name))
    .flatMap(([name, field]) => {
      const fieldPath = `${prefix}${name}`;
      const row = [
        code(fieldPath),
        typeText(field),
        schema.required?.includes(name) ? 'yes' : 'no',
        [prose(field.description), oneOfRequired(field)].filter(Boolean).join(' '),
      ];
      return [row, ...fieldRows(field, `${fieldPath}.`)];
    });
}

/** `oneOf: [{ required: [a] }, { required: [b] }]`: exactly one of the fields named. */
function oneOfRequired(schema: JsonSchema): string {
  const forms = schema.oneOf;
  if (!forms?.every((form) => Object.keys(form).join() === 'required')) return '';
  return `Exactly one of ${forms.map((form) => (form.required ?? []).map(code).join(' and ')).join(', ')}.`;
}

/** A field's type as a phrase: `string, 1-200 characters`, `integer >= 1`, `"apply_patch"`. */
export function typeText(schema: JsonSchema): string {
  if (schema.const !== undefined) return code(JSON.stringify(schema.const));
  if (schema.enum) return `one of ${schema.enum.map((v) => code(JSON.stringify(v))).join(', ')}`;
  const alternatives = schema.anyOf ?? (schema.type === undefined ? schema.oneOf : undefined);
  if (alternatives) return alternatives.map(typeText).join(', or ');
  switch (schema.type) {
    case 'string':
      return [
        'string',
        schema.format ?? (schema.pattern === undefined ? undefined : `matching ${code(schema.pattern)}`),
        lengthText(schema),
      ]
        .filter(Boolean)
        .join(', ');
    case 'integer':
    case 'number':
      return [schema.type, rangeText(schema)].filter(Boolean).join(' ');
    case 'array':
      return `list of ${schema.items ? typeText(schema.items) : 'any'}`;
    case undefined:
      return 'any';
    default:
      return schema.type;
  }
}

function lengthText({ minLength: min, maxLength: max }: JsonSchema): string | undefined {
  if (min !== undefined && max !== undefined) return `${min}-${max} characters`;
  if (min !== undefined) return `at least ${min} character${min === 1 ? '' : 's'}`;
  return max === undefined ? undefined : `at most ${max} characters`;
}

function rangeText(schema: JsonSchema): string | undefined {
  const step = schema.type === 'integer' ? 1 : 0;
  const low = schema.minimum ?? (schema.exclusiveMinimum === undefined ? undefined : schema.exclusiveMinimum + step);
  // zod writes Number.MAX_SAFE_INTEGER for an int without a maximum.
  const high = schema.maximum === Number.MAX_SAFE_INTEGER ? undefined : schema.maximum;
  if (low !== undefined && high !== undefined) return `${low}-${high}`;
  if (low !== undefined) return `>= ${low}`;
  return high === undefined ? undefined : `<= ${high}`;
}

/** A schema's description as Markdown text: `<env>` stays visible instead of reading as an HTML tag. */
function prose(text: string | undefined): string {
  return (text ?? '').replace(/</g, '&lt;');
}

function code(text: string): string {
  return `\`${text}\``;
}

function fence(text: string): string {
  return ['```text', text, '```'].join('\n');
}

/** A Markdown table; a `|` in a cell is escaped, also inside code (GitHub reads `\|` there too). */
function table(headings: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c) => c.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ')).join(' | ')} |`;
  return [line(headings), line(headings.map(() => '---')), ...rows.map(line)].join('\n');
}

function page(blocks: readonly string[]): string {
  return `${blocks.join('\n\n')}\n`;
}

if (require.main === module) {
  const pages = referencePages();
  mkdirSync(path.join(ROOT, REFERENCE_DIR), { recursive: true });
  for (const [file, text] of Object.entries(pages)) writeFileSync(path.join(ROOT, REFERENCE_DIR, file), text);
  process.stdout.write(`wrote ${Object.keys(pages).length} pages to ${REFERENCE_DIR}/\n`);
}
