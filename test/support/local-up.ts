/**
 * `agent-jobs local up` through the real bin, in a process of its own, for cases where the start
 * must be refused (a second start on a state directory in use, a damaged ledger, a directory it
 * cannot write). A start that is not refused prints its ready line; it is then stopped with SIGINT,
 * as Ctrl-C would, and the caller sees exit 0 and the ready line on stdout.
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';

const BIN = path.join(__dirname, '..', '..', 'bin', 'agent-jobs.js');
/** Far longer than a refusal takes on a loaded machine; a start still going then is killed. */
const START_TIMEOUT_MS = 60_000;

export interface LocalUpRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** `dropRoot`: run without root's capabilities when this process is root (root writes anywhere otherwise). */
export function localUp(args: readonly string[], options: { readonly dropRoot?: boolean } = {}): Promise<LocalUpRun> {
  const up = [process.execPath, BIN, 'local', 'up', ...args];
  const dropRoot = options.dropRoot === true && process.getuid?.() === 0;
  const [command, ...argv] = dropRoot ? ['setpriv', '--inh-caps=-all', '--bounding-set=-all', '--', ...up] : up;
  return new Promise((resolve, reject) => {
    const child = spawn(command as string, argv, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NODE_NO_WARNINGS: '1' },
    });
    let stdout = '';
    let stderr = '';
    const stopper = setTimeout(() => child.kill('SIGKILL'), START_TIMEOUT_MS);
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes('ready')) child.kill('SIGINT');
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(stopper);
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}
