/**
 * The CLI run in this process (tools/cli/main.ts runCli over the real commands), for tests whose
 * catalog is a fixture (jest.mock of contract/job-types): a CLI in a child process would read the
 * real catalog.
 */
import { COMMANDS } from '../../tools/cli/commands';
import { runCli } from '../../tools/cli/main';

export interface InProcessResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `agent-jobs <args> --state-dir <stateDir>` from `cwd`, capturing what it prints. */
export async function runCliInProcess(
  args: readonly string[],
  where: { readonly stateDir: string; readonly cwd: string },
): Promise<InProcessResult> {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: (text: string) => (stdout += text),
    stderr: (text: string) => (stderr += text),
    stdin: () => [],
    env: {},
    cwd: where.cwd,
    untilInterrupted: () => new Promise<void>(() => undefined),
  };
  const code = await runCli([...args, '--state-dir', where.stateDir], io, COMMANDS);
  return { code, stdout, stderr };
}
