/**
 * The CLI entry: parse argv against the command table, run the command, print its output
 * (JSON Lines or text) and map failures to exit codes. Failures go to stderr only, as one line
 * (`--verbose` adds the stack trace).
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { PROJECT_ROOT } from '../local/state-dir';
import { commandHelp, overviewHelp, parseInvocation, type CommandSpec } from './command';
import { createContext, type CliContext, type CliIo } from './context';
import { explainUnreachable } from '../operator/connection';
import { InvalidRequestError, OperatorError } from '../operator/errors';
import { EXIT, EXIT_OF_KIND, UsageError } from './errors';

export const PROGRAM = 'agent-jobs';

export async function runCli(
  argv: readonly string[],
  io: CliIo,
  table: readonly CommandSpec<CliContext>[],
): Promise<number> {
  const verbose = argv.includes('--verbose');
  let invocation;
  try {
    invocation = parseInvocation(table, argv);
  } catch (error) {
    return reportError(io, error, argv.includes('--json'), verbose);
  }
  if (invocation.kind === 'help') {
    const text = invocation.command
      ? commandHelp(invocation.command, PROGRAM)
      : overviewHelp(table, PROGRAM, invocation.group);
    io.stdout(`${invocation.json ? JSON.stringify({ help: text }) : text}\n`);
    return EXIT.ok;
  }
  if (invocation.kind === 'version') {
    const version = cliVersion();
    io.stdout(`${invocation.json ? JSON.stringify({ version }) : `${PROGRAM} ${version}`}\n`);
    return EXIT.ok;
  }
  const context = createContext(io, invocation.args.values, (nested) => captured(nested, io, table));
  try {
    const output = await invocation.command.run(context, invocation.args);
    const printed = invocation.json ? jsonLines(output.data) : output.text;
    if (printed) io.stdout(`${printed}\n`);
    return output.exitCode ?? EXIT.ok;
  } catch (error) {
    // A request the operator module found malformed is this command's usage error.
    const usage =
      error instanceof InvalidRequestError && !(error instanceof UsageError)
        ? new UsageError(error.message, invocation.command.path)
        : error;
    return reportError(io, await explainUnreachable(usage, context), invocation.json, verbose);
  } finally {
    context.close();
  }
}

/** `--json` output: JSON Lines, one object per line (a list prints one line per element). */
export function jsonLines(data: unknown): string {
  if (data === undefined) return '';
  return (Array.isArray(data) ? data : [data]).map((item) => JSON.stringify(item)).join('\n');
}

/** The package version, read when asked (`--version`) rather than on every start. */
export function cliVersion(): string {
  const manifest = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version?: unknown };
  return typeof manifest.version === 'string' ? manifest.version : 'unknown';
}

/** Runs a command with the same environment, collecting what it prints instead of printing it. */
async function captured(argv: readonly string[], io: CliIo, table: readonly CommandSpec<CliContext>[]) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(
    argv,
    { ...io, stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), stdin: () => [] },
    table,
  );
  return { code, stdout, stderr };
}

/** One line on stderr (plus the stack of an unexpected error with --verbose); returns the exit code. */
function reportError(io: CliIo, error: unknown, json: boolean, verbose: boolean): number {
  const exitCode = error instanceof OperatorError ? EXIT_OF_KIND[error.kind] : EXIT.failed;
  const message = oneLine(errorText(error));
  if (json) {
    io.stderr(
      `${JSON.stringify({ error: { name: error instanceof Error ? error.name : 'Error', message, exitCode } })}\n`,
    );
  } else {
    const usage =
      error instanceof UsageError
        ? ` (${PROGRAM}${error.commandPath ? ` ${error.commandPath.join(' ')}` : ''} --help shows the usage)`
        : '';
    io.stderr(`${PROGRAM}: ${message}${usage}\n`);
  }
  if (verbose) {
    // The whole chain: a TargetError made from a network error carries the original as its cause.
    for (let e: unknown = error; e instanceof Error; e = e.cause) if (e.stack) io.stderr(`${e.stack}\n`);
  }
  return exitCode;
}

/** What went wrong, also for errors without a message (some SDK and network errors have none). */
function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const detail = error.message || (typeof code === 'string' ? code : '') || error.name;
  return error instanceof OperatorError || error.name === 'Error' || detail.startsWith(error.name)
    ? detail
    : `${error.name}: ${detail}`;
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, '; ').trim();
}

/** The real terminal. */
export function processIo(): CliIo {
  return {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    stdin: () => process.stdin,
    env: process.env,
    cwd: process.cwd(),
    // Registered only when a long-running command asks, so Ctrl-C still kills the others at once.
    untilInterrupted: () =>
      new Promise((resolve) => {
        process.once('SIGINT', () => resolve());
        process.once('SIGTERM', () => resolve());
      }),
  };
}
