/**
 * What a command gets to work with: the terminal (injected, so tests run the CLI in process) and
 * a connection to the target (tools/operator), resolved only when a command needs it (`local up`
 * and `--help` never do).
 */
import * as path from 'node:path';
import { DEFAULT_STATE_DIR } from '../local/state-dir';
import { connect, type Connection } from '../operator/connection';
import { stringOption, type OptionValues } from './command';

export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  /**
   * Stdin as the bytes it streams (a diff in any encoding, a pipe that may never end), read through
   * a bound where it is read (bounded-read.ts).
   */
  readonly stdin: () => AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** Resolves when the user asks to stop (Ctrl-C / SIGTERM); long-running commands await it. */
  readonly untilInterrupted: () => Promise<void>;
}

/** What one command printed, when run in process by another (the demo). */
export interface CapturedRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export type Invoke = (argv: readonly string[]) => Promise<CapturedRun>;

export interface CliContext extends Connection {
  readonly io: CliIo;
  readonly json: boolean;
  /** The local platform state directory (also used by `local up`). */
  readonly stateDir: string;
  /** Where `--stack` and `--region` point (undefined stack: the local platform), for commands that connect on their own. */
  readonly where: { readonly stack?: string; readonly region?: string };
  /** A progress or status line for people: always stderr, so `--json` stdout stays pure. */
  note(line: string): void;
  /** Runs another command of this CLI in process, capturing its output. */
  readonly invoke: Invoke;
}

export function createContext(io: CliIo, values: OptionValues, invoke: Invoke): CliContext & { close(): void } {
  const stateDir = path.resolve(
    io.cwd,
    stringOption(values, 'state-dir') ?? io.env.AGENT_JOBS_STATE_DIR ?? DEFAULT_STATE_DIR,
  );
  const where = {
    stack: stringOption(values, 'stack') ?? io.env.AGENT_JOBS_STACK,
    region: stringOption(values, 'region') ?? io.env.AWS_REGION,
  };
  const connection = connect({ ...where, stateDir });
  return {
    io,
    json: values.json === true,
    stateDir,
    where,
    target: connection.target,
    clients: connection.clients,
    ledger: connection.ledger,
    note: (line) => io.stderr(`${line}\n`),
    invoke,
    close: connection.close,
  };
}
