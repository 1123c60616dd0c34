/**
 * The persisted local ledger (`--persist`: dynalite's LevelDB files in `<stateDir>/dynamodb`) and
 * what the state directory knows about it, so a start never runs silently on a ledger that lost
 * its data beside repositories that kept theirs.
 *
 * - `<stateDir>/state.json` records that the directory holds a persisted ledger and its
 *   generation: a number the platform raises at each start and each clean stop, written into the
 *   ledger first (the item `pk = local#state`) and into state.json after. A ledger whose table is
 *   gone, or whose marker is older than state.json's, lost data: the start is refused.
 * - Files LevelDB cannot open (a damaged CURRENT or MANIFEST) are found by opening them before
 *   dynalite does: dynalite would throw from inside its request handler, taking the process down
 *   with a stack trace. (DynamoDB Local keeps one SQLite file; a damaged one shows as a lost table.)
 * - state.json also records which emulator kept the ledger: the other one cannot read its files,
 *   and a start with it would find no ledger.
 * - A clean stop exports the whole table (`<stateDir>/ledger-export.jsonl`, DynamoDB's own item
 *   format, one item a line) after its last write; `--restore-ledger` moves the damaged files
 *   aside and imports that export.
 *
 * - LevelDB's log files: a ledger that has been opened and written since holds its latest writes
 *   in a log that is never empty (the start's marker is written to the log LevelDB opens with, and
 *   LevelDB starts a new log with the write that fills the old one's buffer). Every log file
 *   empty means they were lost, even when the marker survived: after a crash (`kill -9`) of a run
 *   whose 4 MiB write buffer had moved the start's marker into a table file, only the log held what
 *   came after it. A start records `opening` in state.json before LevelDB opens the files (which
 *   moves their log into a table file and starts an empty one) and removes it once its marker is
 *   written, so a start killed in between does not make the next one refuse a whole ledger.
 *
 * What it cannot see: a log cut short rather than emptied after a crash, since the start's marker
 * was moved out of it (the writes in the lost part). A loss after a clean stop always is: the
 * stop's marker is the ledger's last write.
 */
import { createReadStream, existsSync } from 'node:fs';
import { readdir, rename, stat } from 'node:fs/promises';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import {
  BatchWriteItemCommand,
  GetItemCommand,
  PutItemCommand,
  ResourceNotFoundException,
  ScanCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { Level } from 'level';
import * as z from 'zod/mini';
import '../../contract/zod-english';
import { DYNAMODB_EMULATOR_ENV, DYNAMODB_EMULATORS, type DynamoDbEmulator, type LocalEmulators } from './emulators';
import { readIfPresent, writeFileAtomic } from './write-atomic';

export const MANIFEST_FILE = 'state.json';
export const LEDGER_DIR = 'dynamodb';
export const LEDGER_EXPORT_FILE = 'ledger-export.jsonl';
/** The ledger item holding the generation (no list or index key: no list or query sees it). */
const MARKER_KEY = 'local#state';

/** The persisted ledger cannot be used as it is: one line naming it and the way out. */
export class LedgerStateError extends Error {
  override readonly name = 'LedgerStateError';
}

const manifestSchema = z.object({
  ledger: z.optional(
    z.object({
      generation: z.int(),
      /** The emulator whose files hold it (absent in a manifest written before there was a choice: dynalite). */
      emulator: z.optional(z.enum(DYNAMODB_EMULATORS)),
      /** The last clean stop: when, how many items the ledger held, whether it was exported. */
      cleanStop: z.optional(z.object({ at: z.string(), items: z.int(), exported: z.boolean() })),
      /** A start began opening the ledger then (it removes this once its marker is written): its logs may be empty. */
      opening: z.optional(z.string()),
    }),
  ),
});
export type StateManifest = z.infer<typeof manifestSchema>;

type RawItem = Record<string, AttributeValue>;

export interface PersistedLedgerOptions {
  readonly stateDir: string;
  /** The emulator this start runs (emulators.ts dynamoDbEmulatorOf). */
  readonly emulator: DynamoDbEmulator;
  /** Replace the ledger by the last clean stop's export (`--restore-ledger`). */
  readonly restore?: boolean;
}

/**
 * Before the emulators start: what state.json says, the files LevelDB can open (or, restoring,
 * the damaged files moved aside). `expectsTable`: the ledger table must exist when the emulator opens.
 */
export async function prepareLedger(options: PersistedLedgerOptions): Promise<PersistedLedger> {
  const { stateDir } = options;
  const manifest = await readManifest(stateDir);
  const ledgerDir = path.join(stateDir, LEDGER_DIR);
  const exportFile = path.join(stateDir, LEDGER_EXPORT_FILE);
  const way = wayOut(exportFile);
  if (options.restore) {
    if (!existsSync(exportFile))
      throw new LedgerStateError(
        `--restore-ledger: there is no ${exportFile} (a clean stop with --persist writes it): start afresh with --reset`,
      );
    if (existsSync(ledgerDir))
      await rename(ledgerDir, `${ledgerDir}.replaced-${new Date().toISOString().replace(/[:.]/g, '-')}`);
    return new PersistedLedger(stateDir, manifest, way, options.emulator, exportFile);
  }
  const keptBy = manifest.ledger === undefined ? undefined : (manifest.ledger.emulator ?? 'dynalite');
  if (keptBy !== undefined && keptBy !== options.emulator) {
    throw new LedgerStateError(
      `the persisted ledger in ${ledgerDir} was kept by ${keptBy}, which this start (${options.emulator}) cannot read: start with ${DYNAMODB_EMULATOR_ENV}=${keptBy}, or afresh with --reset (deletes the whole state directory, repositories included)`,
    );
  }
  if (manifest.ledger && !existsSync(ledgerDir)) {
    throw new LedgerStateError(`the persisted ledger in ${ledgerDir} is gone (${recorded(manifest)}): ${way}`);
  }
  const ledger = new PersistedLedger(stateDir, manifest, way, options.emulator);
  if (options.emulator === 'dynalite' && existsSync(ledgerDir)) {
    if (manifest.ledger) {
      await refuseEmptiedLogs(ledgerDir, manifest, way);
      await ledger.markOpening();
    }
    // LevelDB refused the files before it read their log: nothing of theirs moved, no opening to excuse.
    await openable(ledgerDir, way).catch(async (error: unknown) => {
      await ledger.clearOpening();
      throw error;
    });
  }
  return ledger;
}

/**
 * Refuses a ledger whose LevelDB log files are all empty though the state directory recorded a
 * start that wrote to them (a clean stop, or a start that finished opening): their writes are lost.
 */
async function refuseEmptiedLogs(ledgerDir: string, manifest: StateManifest, way: string): Promise<void> {
  if (manifest.ledger?.opening !== undefined) return; // the last start stopped before its first write: an empty log is its own
  const logs = (await readdir(ledgerDir)).filter((name) => name.endsWith('.log')).sort();
  if (logs.length === 0) return; // no log at all is for LevelDB's open to judge (openable)
  const sizes = await Promise.all(logs.map(async (name) => (await stat(path.join(ledgerDir, name))).size));
  if (sizes.some((size) => size > 0)) return;
  throw new LedgerStateError(
    `the persisted ledger in ${ledgerDir} lost data: its log files (${logs.join(', ')}) are empty, so the writes they held since their last move into a table file are gone (${recorded(manifest)}): ${way}`,
  );
}

export class PersistedLedger {
  readonly dir: string;

  constructor(
    private readonly stateDir: string,
    private manifest: StateManifest,
    private readonly way: string,
    private readonly emulator: DynamoDbEmulator,
    /** The export to import into the new table (restoring). */
    private readonly restoreFrom?: string,
  ) {
    this.dir = path.join(stateDir, LEDGER_DIR);
  }

  /** The table must already exist: the state directory recorded a ledger and nothing is restored. */
  get expectsTable(): boolean {
    return this.manifest.ledger !== undefined && this.restoreFrom === undefined;
  }

  /** An error of the DynamoDB emulator's at start, in the ledger's words: what is missing and the way out. */
  explain(error: unknown): unknown {
    if (error instanceof ResourceNotFoundException)
      return new LedgerStateError(
        `the persisted ledger in ${this.dir} lost data: it has no ledger table (${recorded(this.manifest)}): ${this.way}`,
        { cause: error },
      );
    return error;
  }

  /**
   * After the emulators start: imports the export when restoring, refuses a ledger older than
   * state.json says, then raises the generation (ledger first, state.json after).
   */
  async open(emulators: LocalEmulators): Promise<{ restoredItems?: number }> {
    try {
      return await this.check(emulators);
    } catch (error) {
      throw this.explain(error);
    }
  }

  private async check(emulators: LocalEmulators): Promise<{ restoredItems?: number }> {
    const { tableName } = emulators;
    const client = emulators.clients.dynamodb;
    let restoredItems: number | undefined;
    if (this.restoreFrom) restoredItems = await importItems(client, tableName, this.restoreFrom);
    const marker = await readMarker(client, tableName);
    const expected = this.manifest.ledger?.generation;
    if (expected !== undefined && restoredItems === undefined && (marker === undefined || marker < expected)) {
      const found = marker === undefined ? 'an empty ledger' : `a ledger of generation ${marker}`;
      throw new LedgerStateError(
        `the persisted ledger in ${this.dir} lost data: ${found} where ${recorded(this.manifest)}: ${this.way}`,
      );
    }
    await this.advance(emulators, Math.max(marker ?? 0, expected ?? 0) + 1);
    return restoredItems === undefined ? {} : { restoredItems };
  }

  /** A clean stop: the marker is the ledger's last write, then the export, then state.json. */
  async stopCleanly(emulators: LocalEmulators): Promise<void> {
    const generation = (this.manifest.ledger?.generation ?? 0) + 1;
    await writeMarker(emulators.clients.dynamodb, emulators.tableName, generation);
    const items = await exportItems(
      emulators.clients.dynamodb,
      emulators.tableName,
      path.join(this.stateDir, LEDGER_EXPORT_FILE),
    );
    await this.record({
      generation,
      emulator: this.emulator,
      cleanStop: { at: new Date().toISOString(), items, exported: true },
    });
  }

  /** Before LevelDB opens the files: a start killed before its marker leaves its empty log explained (refuseEmptiedLogs). */
  async markOpening(): Promise<void> {
    if (this.manifest.ledger) await this.record({ ...this.manifest.ledger, opening: new Date().toISOString() });
  }

  async clearOpening(): Promise<void> {
    const { opening, ...ledger } = this.manifest.ledger ?? { generation: 0 };
    if (opening !== undefined) await this.record(ledger);
  }

  private async advance(emulators: LocalEmulators, generation: number): Promise<void> {
    await writeMarker(emulators.clients.dynamodb, emulators.tableName, generation);
    const { opening: _done, ...ledger } = this.manifest.ledger ?? { generation };
    await this.record({ ...ledger, generation, emulator: this.emulator });
  }

  private async record(ledger: NonNullable<StateManifest['ledger']>): Promise<void> {
    this.manifest = { ...this.manifest, ledger };
    await writeFileAtomic(path.join(this.stateDir, MANIFEST_FILE), `${JSON.stringify(this.manifest, null, 2)}\n`);
  }
}

function wayOut(exportFile: string): string {
  const restore = existsSync(exportFile)
    ? `restore the last clean stop's export (${exportFile}) with --restore-ledger (jobs recorded after it are lost: re-send them)`
    : 'there is no export to restore (--restore-ledger needs a clean stop with --persist)';
  return `${restore}, or start afresh with --reset (deletes the whole state directory, repositories included)`;
}

function recorded(manifest: StateManifest): string {
  const stop = manifest.ledger?.cleanStop;
  const what = `the state directory recorded a ledger of generation ${manifest.ledger?.generation ?? 0}`;
  return stop ? `${what}, ${stop.items} items at its clean stop of ${stop.at}` : what;
}

async function readManifest(stateDir: string): Promise<StateManifest> {
  const file = path.join(stateDir, MANIFEST_FILE);
  const text = await readIfPresent(file);
  if (text === undefined) return {};
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new LedgerStateError(
      `${file} is not JSON (${(error as Error).message}): restore it, or delete it to start without its checks`,
    );
  }
  const parsed = manifestSchema.safeParse(json);
  if (!parsed.success)
    throw new LedgerStateError(`${file} is not a state manifest: restore it, or delete it to start without its checks`);
  return parsed.data;
}

/** Opens the LevelDB files and closes them again: LedgerStateError when LevelDB cannot. */
async function openable(ledgerDir: string, way: string): Promise<void> {
  const db = new Level(ledgerDir, { createIfMissing: false });
  try {
    await db.open();
  } catch (error) {
    const cause = (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
    throw new LedgerStateError(`the persisted ledger in ${ledgerDir} cannot be opened (${cause}): ${way}`, {
      cause: error,
    });
  } finally {
    await db.close();
  }
}

type DynamoClient = LocalEmulators['clients']['dynamodb'];

async function readMarker(client: DynamoClient, tableName: string): Promise<number | undefined> {
  const { Item } = await client.send(
    new GetItemCommand({ TableName: tableName, Key: { pk: { S: MARKER_KEY } }, ConsistentRead: true }),
  );
  const value = Item?.['generation']?.N;
  return value === undefined ? undefined : Number(value);
}

async function writeMarker(client: DynamoClient, tableName: string, generation: number): Promise<void> {
  await client.send(
    new PutItemCommand({
      TableName: tableName,
      Item: { pk: { S: MARKER_KEY }, generation: { N: String(generation) }, at: { S: new Date().toISOString() } },
    }),
  );
}

/** Every item of the table, one JSON line each (the raw attribute values keep sets and numbers exact); returns how many. */
async function exportItems(client: DynamoClient, tableName: string, file: string): Promise<number> {
  const lines: string[] = [];
  let startKey: RawItem | undefined;
  do {
    const out = await client.send(
      new ScanCommand({ TableName: tableName, ConsistentRead: true, ExclusiveStartKey: startKey }),
    );
    for (const item of out.Items ?? []) lines.push(JSON.stringify(item));
    startKey = out.LastEvaluatedKey;
  } while (startKey);
  await writeFileAtomic(file, lines.length ? `${lines.join('\n')}\n` : '');
  return lines.length;
}

/** BatchWriteItem takes at most 25 items; unprocessed ones are sent again. */
const BATCH_WRITE_ITEMS = 25;

async function importItems(client: DynamoClient, tableName: string, file: string): Promise<number> {
  let batch: RawItem[] = [];
  let count = 0;
  const flush = async () => {
    let requests = batch.map((Item) => ({ PutRequest: { Item } }));
    while (requests.length > 0) {
      const out = await client.send(new BatchWriteItemCommand({ RequestItems: { [tableName]: requests } }));
      requests = (out.UnprocessedItems?.[tableName] ?? []) as typeof requests;
    }
    batch = [];
  };
  const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === '') continue;
    batch.push(JSON.parse(line) as RawItem);
    count++;
    if (batch.length === BATCH_WRITE_ITEMS) await flush();
  }
  await flush();
  return count;
}
