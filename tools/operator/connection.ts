/**
 * What every read and action of the operator module works on: a target (the local platform or a
 * deployed stack), its SDK clients and its ledger, each made on first use, so a read of one job
 * never loads the SQS client and a surface that never reads never resolves the target. A call
 * that cannot reach the target becomes a TargetError that names it (explainUnreachable).
 */
import { LEDGER_RETENTION_DAYS } from '../../contract/topology';
import type { Ledger } from '../../src/core/ports';
import { OperatorError, TargetError } from './errors';
import { createClients, resolveTarget, type ResolveOptions, type Target, type TargetClients } from './targets';

export interface Connection {
  target(): Promise<Target>;
  clients(): Promise<TargetClients>;
  ledger(): Promise<Ledger>;
}

export interface OpenConnection extends Connection {
  /** Destroys the SDK clients made so far (their sockets); safe when none was made. */
  close(): void;
}

// Loaded by the first read of the ledger (require: see targets.ts), with the DynamoDB SDK it needs.
const loadLedger = (): typeof import('../../src/adapters/dynamodb-ledger') =>
  require('../../src/adapters/dynamodb-ledger');

/** A connection to the target `where` names: `stack` (and `region`) for a deployed stack, else the local platform at `stateDir`. */
export function connect(where: ResolveOptions): OpenConnection {
  let target: Promise<Target> | undefined;
  let clients: TargetClients | undefined;
  let ledger: Ledger | undefined;
  const connection: OpenConnection = {
    // A target that could not be resolved is asked again next time (a console outlives a platform restart).
    target: () =>
      (target ??= resolveTarget(where).catch((error: unknown) => {
        target = undefined;
        throw error;
      })),
    clients: async () => (clients ??= createClients(await connection.target())),
    ledger: async () =>
      (ledger ??= new (loadLedger().DynamoDbLedger)({
        client: (await connection.clients()).dynamodb,
        tableName: (await connection.target()).tableName,
        retentionDays: LEDGER_RETENTION_DAYS,
      })),
    close: () => clients?.destroy(),
  };
  return connection;
}

/** Network errors that mean the platform or stack is not there (or not reachable from here). */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'EAI_AGAIN',
]);

/** A network code anywhere in the error, its causes or its aggregated errors. */
function networkCode(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && UNREACHABLE.has(code)) return code;
  const inner = error instanceof AggregateError ? (error.errors as unknown[]) : [];
  for (const next of [error.cause, ...inner]) {
    const found = networkCode(next);
    if (found) return found;
  }
  return undefined;
}

/** An SDK call that could not connect becomes a TargetError naming what it tried to reach; any other error is returned as it is. */
export async function explainUnreachable(error: unknown, connection: Pick<Connection, 'target'>): Promise<unknown> {
  const code = networkCode(error);
  if (code === undefined || error instanceof OperatorError) return error;
  const label = await connection.target().then(
    (target) => target.label,
    () => 'the platform',
  );
  const hint = label.startsWith('local')
    ? 'is it running? (agent-jobs local up)'
    : 'check the region, the network and your credentials';
  return new TargetError(`cannot reach ${label}: ${code}: ${hint}`, { cause: error });
}
