/**
 * The CLI entry: parse argv against the command table, run the command, print its output
 * (JSON or text) and map failures to exit codes. Failures go to stderr only.
 */
import { commandHelp, overviewHelp, parseInvocation, type CommandSpec } from './command';
import { createContext, type CliContext, type CliIo } from './context';
import { CliError, UsageError } from './errors';

export const PROGRAM = 'agent-jobs';

export async function runCli(argv: readonly string[], io: CliIo, table: readonly CommandSpec<CliContext>[]): Promise<number> {
  let invocation;
  try {
    invocation = parseInvocation(table, argv);
  } catch (error) {
    return reportError(io, error, table, argv.includes('--json'));
  }
  if (invocation.kind === 'help') {
    const text = invocation.command ? commandHelp(invocation.command, PROGRAM) : overviewHelp(table, PROGRAM);
    io.stdout(`${invocation.json ? JSON.stringify({ help: text }) : text}\n`);
    return 0;
  }
  const context = createContext(io, invocation.args.values, (nested) => captured(nested, io, table));
  try {
    const output = await invocation.command.run(context, invocation.args);
    const printed = invocation.json ? JSON.stringify(output.data, null, 2) : output.text;
    if (printed) io.stdout(`${printed}\n`);
    return output.exitCode ?? 0;
  } catch (error) {
    return reportError(io, error, table, invocation.json);
  } finally {
    context.close();
  }
}

/** Runs a command with the same environment, collecting what it prints instead of printing it. */
async function captured(argv: readonly string[], io: CliIo, table: readonly CommandSpec<CliContext>[]) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, { ...io, stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), readStdin: async () => '' }, table);
  return { code, stdout, stderr };
}

function reportError(io: CliIo, error: unknown, table: readonly CommandSpec<CliContext>[], json: boolean): number {
  const known = error instanceof CliError;
  const message = error instanceof Error ? error.message : String(error);
  // Unexpected errors keep their stack: they are bugs or SDK failures worth reading in full.
  const detail = known || !(error instanceof Error) ? message : (error.stack ?? message);
  if (json) {
    io.stderr(`${JSON.stringify({ error: { name: error instanceof Error ? error.name : 'Error', message } })}\n`);
  } else {
    io.stderr(`${PROGRAM}: ${detail}\n`);
    if (error instanceof UsageError) {
      const command = error.commandPath && table.find((c) => c.path.join(' ') === error.commandPath?.join(' '));
      io.stderr(`\n${command ? commandHelp(command, PROGRAM) : overviewHelp(table, PROGRAM)}\n`);
    }
  }
  return known ? error.exitCode : 1;
}

/** The real terminal. */
export function processIo(): CliIo {
  return {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    },
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
