/**
 * What a command gets to work with: the terminal (injected, so tests run the CLI in process) and
 * the target, resolved only when a command needs it (`local up` and `--help` never do).
 */
import * as path from 'node:path';
import { LEDGER_RETENTION_DAYS } from '../../contract/topology';
import { DEFAULT_STATE_DIR } from '../local/state-dir';
import { createClients, resolveTarget, type Target, type TargetClients } from '../operator/targets';
import { stringOption, type OptionValues } from './command';
import type { Ledger } from '../core/ports';

export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly readStdin: () => Promise<string>;
  /** Stdin as bytes, for a file flag read from `-` (a diff in any encoding); absent: UTF-8 of readStdin. */
  readonly readStdinBytes?: () => Promise<Uint8Array>;
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

export interface CliContext {
  readonly io: CliIo;
  readonly json: boolean;
  /** The local platform state directory (also used by `local up`). */
  readonly stateDir: string;
  target(): Promise<Target>;
  clients(): Promise<TargetClients>;
  ledger(): Promise<Ledger>;
  /** A progress or status line for people: always stderr, so `--json` stdout stays pure. */
  note(line: string): void;
  /** Runs another command of this CLI in process, capturing its output. */
  readonly invoke: Invoke;
}

// Loaded by the first command that reads the ledger (require: see targets.ts), with the DynamoDB SDK it needs.
const loadLedger = (): typeof import('../adapters/dynamodb-ledger') => require('../adapters/dynamodb-ledger');

export function createContext(io: CliIo, values: OptionValues, invoke: Invoke): CliContext & { close(): void } {
  const stateDir = path.resolve(io.cwd, stringOption(values, 'state-dir') ?? io.env.AGENT_JOBS_STATE_DIR ?? DEFAULT_STATE_DIR);
  const stack = stringOption(values, 'stack') ?? io.env.AGENT_JOBS_STACK;
  const region = stringOption(values, 'region') ?? io.env.AWS_REGION;
  let target: Promise<Target> | undefined;
  let clients: TargetClients | undefined;
  let ledger: Ledger | undefined;
  const context: CliContext & { close(): void } = {
    io,
    json: values.json === true,
    stateDir,
    target: () => (target ??= resolveTarget({ stack, region, stateDir })),
    clients: async () => (clients ??= createClients(await context.target())),
    ledger: async () =>
      (ledger ??= new (loadLedger().DynamoDbLedger)({ client: (await context.clients()).dynamodb, tableName: (await context.target()).tableName, retentionDays: LEDGER_RETENTION_DAYS })),
    note: (line) => io.stderr(`${line}\n`),
    invoke,
    close: () => clients?.destroy(),
  };
  return context;
}
