/**
 * What every read and action of the operator module works on: a target (the local platform or a
 * deployed stack), its SDK clients and its ledger, each made on first use, so a read of one job
 * never loads the SQS client and a surface that never reads never resolves the target.
 */
import { LEDGER_RETENTION_DAYS } from '../../contract/topology';
import type { Ledger } from '../core/ports';
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
const loadLedger = (): typeof import('../adapters/dynamodb-ledger') => require('../adapters/dynamodb-ledger');

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
      (ledger ??= new (loadLedger().DynamoDbLedger)({ client: (await connection.clients()).dynamodb, tableName: (await connection.target()).tableName, retentionDays: LEDGER_RETENTION_DAYS })),
    close: () => clients?.destroy(),
  };
  return connection;
}
