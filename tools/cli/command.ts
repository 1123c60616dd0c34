/**
 * The command frame: one table of commands, from which argument parsing (node:util parseArgs)
 * and every `--help` text are generated, so a command's flags and its help cannot drift apart.
 */
import { parseArgs } from 'node:util';
import { UsageError } from './errors';

export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  readonly description: string;
  readonly short?: string;
  readonly multiple?: boolean;
  /** Shown in help after a string flag: `--timeout <seconds>`. */
  readonly valueName?: string;
}

export interface PositionalSpec {
  readonly name: string;
  readonly description: string;
  readonly optional?: boolean;
  /** A fixed word such as `-`, shown as is instead of `<name>`. */
  readonly literal?: boolean;
  /** Takes every remaining positional (only the last one). */
  readonly variadic?: boolean;
}

export type OptionValues = Record<string, string | boolean | string[] | undefined>;

export interface ParsedArgs {
  readonly positionals: readonly string[];
  readonly values: OptionValues;
}

/** What a command hands back: the JSON value for `--json`, the text for people. */
export interface CommandOutput {
  readonly data: unknown;
  readonly text: string;
  /** Non-zero when the command ran but its outcome is a failure (e.g. `wait` on a failed job). */
  readonly exitCode?: number;
}

export interface CommandSpec<Ctx> {
  readonly path: readonly string[];
  readonly summary: string;
  readonly positionals?: readonly PositionalSpec[];
  readonly options?: Readonly<Record<string, OptionSpec>>;
  /** Extra lines at the end of the help (examples, notes). */
  readonly notes?: readonly string[];
  run(ctx: Ctx, args: ParsedArgs): Promise<CommandOutput>;
}

/** Options every command accepts. */
export const GLOBAL_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  json: { type: 'boolean', description: 'print machine-readable JSON on stdout and nothing else' },
  stack: {
    type: 'string',
    valueName: 'name',
    description: 'target a deployed stack (default: $AGENT_JOBS_STACK, else the local platform)',
  },
  region: { type: 'string', valueName: 'region', description: 'AWS region of the stack (default: $AWS_REGION)' },
  'state-dir': {
    type: 'string',
    valueName: 'dir',
    description: 'local platform state directory (default: .agent-jobs in the project)',
  },
  verbose: { type: 'boolean', description: 'on an error, print its stack trace (and its causes) too' },
  help: { type: 'boolean', short: 'h', description: 'show help' },
};

export type Invocation<Ctx> =
  /** `group`: the first word of several commands (`dlq --help`): the help lists that group's commands. */
  | { readonly kind: 'help'; readonly command?: CommandSpec<Ctx>; readonly group?: string; readonly json: boolean }
  | { readonly kind: 'version'; readonly json: boolean }
  | { readonly kind: 'run'; readonly command: CommandSpec<Ctx>; readonly args: ParsedArgs; readonly json: boolean };

/** Finds the command named by the leading words of argv (longest match) and parses the rest. */
export function parseInvocation<Ctx>(table: readonly CommandSpec<Ctx>[], argv: readonly string[]): Invocation<Ctx> {
  const words = leadingWords(argv);
  const command = [...table]
    .sort((a, b) => b.path.length - a.path.length)
    .find((c) => c.path.every((w, i) => words[i] === w));
  const json = argv.includes('--json');
  if (!command) {
    if (words.length === 0 && argv.includes('--version')) return { kind: 'version', json };
    if (words.length === 0 || words[0] === 'help') return { kind: 'help', json };
    const group = table.filter((c) => c.path[0] === words[0]);
    if (group.length > 0 && (argv.includes('--help') || argv.includes('-h')))
      return { kind: 'help', group: words[0], json };
    throw new UsageError(`unknown command: ${words.slice(0, 2).join(' ')}`);
  }
  const rest = argv.slice(command.path.length);
  let parsed: { values: OptionValues; positionals: string[] };
  try {
    parsed = parseArgs({
      args: [...rest],
      options: { ...GLOBAL_OPTIONS, ...command.options },
      allowPositionals: true,
      strict: true,
    }) as { values: OptionValues; positionals: string[] };
  } catch (error) {
    throw new UsageError((error as Error).message, command.path);
  }
  if (parsed.values.help === true) return { kind: 'help', command, json };
  checkPositionals(command, parsed.positionals);
  return { kind: 'run', command, args: parsed, json: parsed.values.json === true };
}

function leadingWords(argv: readonly string[]): string[] {
  const words: string[] = [];
  for (const arg of argv) {
    if (arg.startsWith('-')) break;
    words.push(arg);
  }
  return words;
}

function checkPositionals<Ctx>(command: CommandSpec<Ctx>, given: readonly string[]): void {
  const specs = command.positionals ?? [];
  const required = specs.filter((p) => !p.optional).length;
  const variadic = specs.some((p) => p.variadic);
  if (given.length < required) {
    const missing = specs[given.length];
    throw new UsageError(`missing argument <${missing?.name ?? '?'}>`, command.path);
  }
  if (!variadic && given.length > specs.length) {
    throw new UsageError(`unexpected argument: ${given[specs.length] ?? ''}`, command.path);
  }
}

/**
 * Help of one command, generated from its table entry. `globals: false` leaves out the options
 * every command takes (the reference page, docs/reference/cli.md, shows them once: globalOptionsHelp).
 */
export function commandHelp<Ctx>(command: CommandSpec<Ctx>, program: string, { globals = true } = {}): string {
  const positionals = (command.positionals ?? []).map((p) => {
    const name = `${positionalLabel(p)}${p.variadic ? '...' : ''}`;
    return p.optional ? `[${name}]` : name;
  });
  const lines = [`Usage: ${[program, ...command.path, ...positionals].join(' ')} [options]`, '', command.summary];
  if (command.positionals?.length) {
    lines.push('', 'Arguments:', ...alignRows(command.positionals.map((p) => [positionalLabel(p), p.description])));
  }
  const options = Object.entries(command.options ?? {});
  if (options.length) lines.push('', 'Options:', ...alignRows(options.map(([n, o]) => optionRow(n, o))));
  if (globals) lines.push('', globalOptionsHelp());
  if (command.notes?.length) lines.push('', ...command.notes);
  return lines.join('\n');
}

/** The options every command accepts, as the help of each command lists them. */
export function globalOptionsHelp(): string {
  return ['Global options:', ...alignRows(Object.entries(GLOBAL_OPTIONS).map(([n, o]) => optionRow(n, o)))].join('\n');
}

/** The overview: every command (or every command of a group, `dlq ...`) and its summary. */
export function overviewHelp<Ctx>(table: readonly CommandSpec<Ctx>[], program: string, group?: string): string {
  const commands = group === undefined ? table : table.filter((c) => c.path[0] === group);
  return [
    `Usage: ${program}${group === undefined ? '' : ` ${group}`} <command> [options]`,
    '',
    'Commands:',
    ...alignRows(commands.map((c) => [c.path.join(' '), c.summary])),
    '',
    `Run "${program} <command> --help" for the options of a command; "${program} --version" prints the version.`,
  ].join('\n');
}

function positionalLabel(p: PositionalSpec): string {
  return p.literal ? p.name : `<${p.name}>`;
}

function optionRow(name: string, option: OptionSpec): [string, string] {
  const flag = `${option.short ? `-${option.short}, ` : ''}--${name}${option.type === 'string' ? ` <${option.valueName ?? 'value'}>` : ''}`;
  return [flag, option.multiple ? `${option.description} (repeatable)` : option.description];
}

export function alignRows(rows: readonly (readonly [string, string])[], indent = '  '): string[] {
  const width = Math.max(0, ...rows.map(([left]) => left.length));
  return rows.map(([left, right]) => `${indent}${left.padEnd(width)}  ${right}`.trimEnd());
}

/** Typed accessors for parsed option values. */
export function stringOption(values: OptionValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

export function requireString(values: OptionValues, name: string, path: readonly string[]): string {
  const value = stringOption(values, name);
  if (value === undefined) throw new UsageError(`--${name} is required`, path);
  return value;
}

export function numberOption(values: OptionValues, name: string, path: readonly string[]): number | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || raw.trim() === '')
    throw new UsageError(`--${name} must be a number, got "${raw}"`, path);
  return value;
}
