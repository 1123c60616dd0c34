/**
 * The idempotency ledger, three designs side by side on both DynamoDB emulators, counting the
 * DynamoDB requests of each delivery path and what AWS would bill for them:
 * - this project's ledger (src/adapters/dynamodb-ledger.ts): a claim is one conditional write
 *   whose refusal carries the item it was refused on (a read only where it does not), completion
 *   is one write;
 * - Powertools idempotency (`makeIdempotent` over its DynamoDBPersistenceLayer), keyed on the job
 *   id with the payload validated, so a reused id with another payload is refused;
 * - get-then-put: a consistent read, then a conditional put, then the completion write.
 * Paths: a first delivery run to success; a duplicate after success; a duplicate while the first
 * is still running; a conflict (the same job id with another payload, after success).
 *
 * AWS's DynamoDB Local returns the refused item (ReturnValuesOnConditionCheckFailure) as DynamoDB
 * does, so its counts are what AWS would bill; dynalite returns none, so both this ledger and
 * Powertools read the item after a refusal there. Needs `java` (tools/local/dynamodb-local.ts).
 */
import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { DynamoDbLedger } from '../src/adapters/dynamodb-ledger';
import { jobDigest, type JobEnvelope } from '../src/core/envelope';
import {
  DYNAMODB_EMULATORS,
  startEmulators,
  type DynamoDbEmulator,
  type LocalEmulators,
} from '../tools/local/emulators';
import { PRICES_AS_OF, PRICES_USD, RequestCounter, perMillionJobs, usd } from './aws-bill';
import type { Benchmark, BenchRow } from './harness';

type Path = 'first delivery' | 'duplicate after success' | 'duplicate in flight' | 'conflict';
const PATHS: readonly Path[] = ['first delivery', 'duplicate after success', 'duplicate in flight', 'conflict'];
const JOBS_PER_PATH = 50;

/** DynamoDB units one delivery used. */
interface Units {
  readonly writes: number;
  readonly reads: number;
}

/** One design: how it handles a delivery of each path. */
interface Design {
  readonly name: string;
  /** Runs `path` for a fresh job (set up first when the path needs an earlier delivery) and returns the units of that delivery alone. */
  run(path: Path, n: number): Promise<Units>;
}

const unitsOf = (counter: RequestCounter): Units => ({ writes: counter.writes, reads: counter.readUnits });

function job(id: string, payload: Record<string, unknown> = { command: 'npm test' }): JobEnvelope {
  return {
    jobId: id,
    workspaceId: 'ws-bench',
    tenantId: 'bench',
    type: 'run_tests',
    createdAt: new Date().toISOString(),
    payload,
  } as JobEnvelope;
}

/** A promise and the function that resolves it (to hold a first delivery in flight). */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

function ourLedger(emulators: LocalEmulators, counter: RequestCounter): Design {
  const ledger = new DynamoDbLedger({
    client: emulators.clients.dynamodb,
    tableName: emulators.tableName,
    retentionDays: 30,
  });
  const claim = (envelope: JobEnvelope, owner = randomUUID()) =>
    ledger.claim({
      job: envelope,
      digest: jobDigest(envelope),
      owner,
      now: Date.now(),
      leaseMs: 60_000,
      consumer: 'sequencer',
    });
  const succeed = async (envelope: JobEnvelope) => {
    const owner = randomUUID();
    const claimed = await claim(envelope, owner);
    if (claimed.kind !== 'claimed') throw new Error(`expected a claim, got ${claimed.kind}`);
    await ledger.complete({
      jobId: envelope.jobId,
      owner,
      now: Date.now(),
      verdict: { status: 'SUCCEEDED', result: { ok: true } },
    });
  };
  const expect = async (envelope: JobEnvelope, kind: string) => {
    const outcome = await claim(envelope);
    if (outcome.kind !== kind) throw new Error(`expected ${kind}, got ${outcome.kind}`);
  };
  return {
    name: 'this ledger (conditional write, the refused item returned)',
    async run(path, n) {
      const envelope = job(`ours-${path.replace(/ /g, '-')}-${n}`);
      if (path === 'duplicate in flight') await claim(envelope);
      else if (path !== 'first delivery') await succeed(envelope);
      counter.reset();
      if (path === 'first delivery') await succeed(envelope);
      if (path === 'duplicate after success') await expect(envelope, 'duplicate');
      if (path === 'duplicate in flight') await expect(envelope, 'busy');
      if (path === 'conflict') await expect(job(envelope.jobId, { command: 'something else' }), 'conflict');
      return unitsOf(counter);
    },
  };
}

async function powertools(emulators: LocalEmulators, counter: RequestCounter): Promise<Design> {
  const client = new DynamoDBClient({
    endpoint: emulators.endpoints.dynamodb,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  counter.attach(client);
  const tableName = 'powertools-idempotency';
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  const persistenceStore = new DynamoDBPersistenceLayer({ tableName, awsSdkV3Client: client });
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'jobId', payloadValidationJmesPath: 'payload' });
  // As in a handler: Powertools reads the invocation's remaining time from the context.
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 } as Context);
  let hold: Promise<void> = Promise.resolve();
  const handle = makeIdempotent(
    async (_event: { jobId: string; payload: unknown }) => {
      await hold;
      return { ok: true };
    },
    { persistenceStore, config },
  );
  return {
    name: 'Powertools idempotency (DynamoDBPersistenceLayer)',
    async run(path, n) {
      const event = { jobId: `pt-${path.replace(/ /g, '-')}-${n}`, payload: { command: 'npm test' } };
      if (path === 'first delivery') {
        counter.reset();
        await handle(event);
        return unitsOf(counter);
      }
      const inFlight = deferred();
      if (path === 'duplicate in flight') hold = inFlight.promise;
      const first = handle(event);
      if (path !== 'duplicate in flight') await first;
      else await new Promise((r) => setTimeout(r, 50)); // the first delivery has written its INPROGRESS record
      counter.reset();
      const again = path === 'conflict' ? { ...event, payload: { command: 'something else' } } : event;
      const outcome = await handle(again).then(
        () => 'returned',
        (error: Error) => error.name,
      );
      const expected = {
        'duplicate after success': 'returned',
        'duplicate in flight': 'IdempotencyAlreadyInProgressError',
        conflict: 'IdempotencyValidationError',
      }[path];
      if (outcome !== expected) throw new Error(`Powertools ${path}: expected ${expected}, got ${outcome}`);
      const units = unitsOf(counter);
      inFlight.resolve();
      hold = Promise.resolve();
      await first;
      return units;
    },
  };
}

function getThenPut(emulators: LocalEmulators, counter: RequestCounter): Design {
  const client: DynamoDBDocumentClient = emulators.clients.dynamodb;
  const TableName = emulators.tableName;
  const deliver = async (envelope: JobEnvelope, finish: boolean): Promise<string> => {
    const key = { pk: `gtp#${envelope.jobId}` };
    const { Item } = await client.send(new GetCommand({ TableName, Key: key, ConsistentRead: true }));
    const digest = jobDigest(envelope);
    if (Item) return Item['digest'] !== digest ? 'conflict' : Item['status'] === 'SUCCEEDED' ? 'duplicate' : 'busy';
    await client.send(
      new PutCommand({
        TableName,
        Item: { ...key, digest, status: 'IN_FLIGHT' },
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
    if (finish) {
      await client.send(
        new UpdateCommand({
          TableName,
          Key: key,
          UpdateExpression: 'SET #s = :s',
          ExpressionAttributeNames: { '#s': 'status' },
          ExpressionAttributeValues: { ':s': 'SUCCEEDED' },
        }),
      );
    }
    return 'claimed';
  };
  return {
    name: 'get-then-put (read, conditional put, completion write)',
    async run(path, n) {
      const envelope = job(`gtp-${path.replace(/ /g, '-')}-${n}`);
      if (path === 'first delivery') {
        counter.reset();
        await deliver(envelope, true);
        return unitsOf(counter);
      }
      await deliver(envelope, path !== 'duplicate in flight');
      counter.reset();
      const again = path === 'conflict' ? job(envelope.jobId, { command: 'something else' }) : envelope;
      const outcome = await deliver(again, true);
      const expected = { 'duplicate after success': 'duplicate', 'duplicate in flight': 'busy', conflict: 'conflict' }[
        path
      ];
      if (outcome !== expected) throw new Error(`get-then-put ${path}: expected ${expected}, got ${outcome}`);
      return unitsOf(counter);
    },
  };
}

/** Mean units per delivery of `path` over JOBS_PER_PATH jobs. */
async function countPath(design: Design, path: Path): Promise<Units> {
  let writes = 0;
  let reads = 0;
  for (let n = 0; n < JOBS_PER_PATH; n++) {
    const units = await design.run(path, n);
    writes += units.writes;
    reads += units.reads;
  }
  return { writes: writes / JOBS_PER_PATH, reads: reads / JOBS_PER_PATH };
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
const unitsText = (u: Units) => `${plural(u.writes, 'write')} + ${plural(u.reads, 'consistent read')}`;
const shortText = (u: Units) => `${u.writes}W+${u.reads}R`;
const awsCost = (u: Units) =>
  perMillionJobs(u.writes, PRICES_USD.dynamoWriteUnit) + perMillionJobs(u.reads, PRICES_USD.dynamoReadUnit);

/** Units by design name, then path, on one emulator. */
type Counts = Map<string, Map<Path, Units>>;

async function countOn(emulator: DynamoDbEmulator): Promise<Counts> {
  const emulators = await startEmulators({ dynamoDb: emulator });
  try {
    const counter = new RequestCounter().attach(emulators.clients.dynamodb);
    const designs = [
      ourLedger(emulators, counter),
      await powertools(emulators, new RequestCounter()),
      getThenPut(emulators, counter),
    ];
    const counts: Counts = new Map();
    for (const design of designs) {
      const byPath = new Map<Path, Units>();
      for (const path of PATHS) byPath.set(path, await countPath(design, path));
      counts.set(design.name, byPath);
    }
    return counts;
  } finally {
    await emulators.stop();
  }
}

export const bench: Benchmark = {
  name: 'ledger',
  async run() {
    const [onDynalite, onDynamoDbLocal] = [await countOn('dynalite'), await countOn('dynamodb-local')];
    const units = (counts: Counts, design: string, path: Path) =>
      counts.get(design)?.get(path) ?? { writes: NaN, reads: NaN };
    const designs = [...onDynamoDbLocal.keys()];
    const [ours, powertoolsName] = designs as [string, string];
    const rows: BenchRow[] = [];
    const perDesign: string[] = [];
    for (const design of designs) {
      for (const path of PATHS) {
        const local = units(onDynamoDbLocal, design, path);
        const lite = units(onDynalite, design, path);
        rows.push({
          label: `${design}: ${path}`,
          value: `DynamoDB Local: ${unitsText(local)}, ${usd(awsCost(local))} per million on AWS; dynalite: ${unitsText(lite)}`,
        });
      }
      perDesign.push(
        `${design.replace(/ \(.*$/, '')} ${PATHS.map((path) => shortText(units(onDynamoDbLocal, design, path))).join(' / ')}`,
      );
    }
    const differing = PATHS.filter(
      (path) =>
        shortText(units(onDynamoDbLocal, ours, path)) !== shortText(units(onDynamoDbLocal, powertoolsName, path)),
    );
    rows.push({
      label: 'this ledger against Powertools on DynamoDB Local',
      value: differing.length === 0 ? 'the same requests on every path' : `different on: ${differing.join(', ')}`,
    });
    return {
      title: 'Ledger: DynamoDB requests per job by delivery path, three designs',
      description: [
        `${JOBS_PER_PATH} jobs per path and design on each DynamoDB emulator (${DYNAMODB_EMULATORS.join(', ')}), requests counted by SDK middleware. Items are under 1 KB,`,
        'so a write is one write request unit and a consistent read one read request unit; a refused conditional write is billed like any',
        'write, and the item it returns costs no read. DynamoDB Local returns a refused item as DynamoDB does, so its counts are what AWS',
        'would bill; dynalite returns none, so the ledger and Powertools read the item after a refusal there.',
        `Prices: DynamoDB on-demand, us-east-1, $0.625 per million write and $0.125 per million read request units (aws.amazon.com/dynamodb/pricing/on-demand, ${PRICES_AS_OF}).`,
        'Per million deliveries of that path. The platform adds two workspace-record writes per ordered job (cursor and head) whatever the ledger; see the cost section.',
        'Throughput on the emulators is left out: it says nothing about DynamoDB.',
        '',
        'Command: `npm run bench ledger` (needs `java`, for DynamoDB Local)',
      ].join('\n'),
      rows,
      summary: [
        {
          measure: `ledger requests per delivery on DynamoDB Local, as AWS bills them (W writes, R consistent reads): ${PATHS.join(' / ')}`,
          value: perDesign.join('; '),
          goal: 'by path, against Powertools idempotency and get-then-put',
        },
      ],
    };
  },
};
