/**
 * The local AWS: fauxqs (SQS + S3) and dynalite (DynamoDB), both in this process, both bound to
 * 127.0.0.1, with the queues, DLQs, ledger table and diff bucket created from the same contract
 * the stack uses (contract/topology.ts), so local settings cannot drift from the deployed ones.
 * AGENT_JOBS_LOCAL_DYNAMODB=dynamodb-local runs AWS's DynamoDB Local (a Java process, also on
 * 127.0.0.1: dynamodb-local.ts) in place of dynalite, wherever emulators start: the platform, the
 * CLI's `local up` and every test.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as vm from 'node:vm';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  ResourceInUseException,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import dynalite from 'dynalite';
import { startDynamoDbLocal } from './dynamodb-local';
import { MAX_MESSAGE_BYTES } from '../../contract/runtime-env';
import {
  DLQ_RETENTION_DAYS,
  LEDGER_TABLE,
  QUEUE_RETENTION_DAYS,
  platformQueues,
  queueName,
  type QueueSpec,
} from '../../contract/topology';

export const LOCAL_REGION = 'us-east-1';
export const LOCAL_TABLE_NAME = 'agent-jobs-ledger';
export const LOCAL_DIFF_BUCKET = 'agent-jobs-diffs';
const LOOPBACK = '127.0.0.1';
const DAY_SECONDS = 86_400;

export interface EmulatorEndpoints {
  readonly sqs: string;
  readonly dynamodb: string;
  /** fauxqs serves S3 on the SQS port (path-style only). */
  readonly s3: string;
}

export interface LocalClients {
  readonly sqs: SQSClient;
  readonly dynamodb: DynamoDBDocumentClient;
  readonly s3: S3Client;
  /** Closes the clients' sockets (the document client's own destroy() is a no-op). */
  destroy(): void;
}

/** The DynamoDB emulators: dynalite (Node.js, in this process) or AWS's DynamoDB Local (Java). */
export const DYNAMODB_EMULATORS = ['dynalite', 'dynamodb-local'] as const;
export type DynamoDbEmulator = (typeof DYNAMODB_EMULATORS)[number];
/** Names the DynamoDB emulator; child processes (`local up`, the CLI) inherit it. */
export const DYNAMODB_EMULATOR_ENV = 'AGENT_JOBS_LOCAL_DYNAMODB';

/** The DynamoDB emulator `env` asks for: dynalite unless AGENT_JOBS_LOCAL_DYNAMODB names another. */
export function dynamoDbEmulatorOf(env: NodeJS.ProcessEnv = process.env): DynamoDbEmulator {
  const value = env[DYNAMODB_EMULATOR_ENV];
  if (value === undefined || value === '') return 'dynalite';
  const known = DYNAMODB_EMULATORS.find((name) => name === value);
  if (known === undefined)
    throw new Error(`${DYNAMODB_EMULATOR_ENV}=${value}: expected one of ${DYNAMODB_EMULATORS.join(', ')}`);
  return known;
}

export interface EmulatorOptions {
  /** 0 or absent: a free port. */
  readonly ports?: { readonly sqs?: number; readonly dynamodb?: number };
  /** Directory of the DynamoDB emulator's files; in memory when absent. fauxqs is always in memory. */
  readonly dynamoDbPath?: string;
  /** @default dynamoDbEmulatorOf(process.env) */
  readonly dynamoDb?: DynamoDbEmulator;
  /**
   * 'existing': the ledger table must be there already (a persisted ledger the state directory
   * recorded): its absence is DynamoDB's ResourceNotFoundException instead of a new, empty table.
   * @default 'create'
   */
  readonly ledgerTable?: 'create' | 'existing';
  /** @default platformQueues() */
  readonly topology?: readonly QueueSpec[];
}

export interface LocalEmulators {
  readonly endpoints: EmulatorEndpoints;
  /** Which emulator serves DynamoDB. */
  readonly dynamoDb: DynamoDbEmulator;
  readonly topology: readonly QueueSpec[];
  /** Queue URL by QueueSpec.name (the base name, e.g. `agent-jobs`). */
  readonly queueUrls: Readonly<Record<string, string>>;
  /** DLQ URL by the QueueSpec.name of the queue it serves. */
  readonly dlqUrls: Readonly<Record<string, string>>;
  readonly tableName: string;
  readonly bucketName: string;
  readonly clients: LocalClients;
  /** Closes the clients and both servers; safe to call twice. */
  stop(): Promise<void>;
}

/**
 * SDK client settings for a local endpoint. The endpoint is always explicit: fauxqs queue URLs
 * are not meant to be dialled, and the SDK must never fall back to real AWS.
 */
export function localClientConfig(endpoint: string) {
  return { endpoint, region: LOCAL_REGION, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } };
}

export function createLocalClients(endpoints: EmulatorEndpoints): LocalClients {
  const sqs = new SQSClient(localClientConfig(endpoints.sqs));
  const dynamodb = new DynamoDBClient(localClientConfig(endpoints.dynamodb));
  const s3 = new S3Client({ ...localClientConfig(endpoints.s3), forcePathStyle: true });
  return {
    sqs,
    dynamodb: DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } }),
    s3,
    destroy() {
      sqs.destroy();
      dynamodb.destroy();
      s3.destroy();
    },
  };
}

export async function startEmulators(options: EmulatorOptions = {}): Promise<LocalEmulators> {
  const topology = options.topology ?? platformQueues();
  const dynamoDb = options.dynamoDb ?? dynamoDbEmulatorOf();
  const fauxqs = await startFauxqs(options.ports?.sqs ?? 0);
  let dynamo: DynamoDbServer | undefined;
  let clients: LocalClients | undefined;
  const stopAll = once(async () => {
    clients?.destroy();
    await Promise.all([fauxqs.close(), dynamo?.stop()]);
  });
  try {
    dynamo = await startDynamoDb(dynamoDb, { port: options.ports?.dynamodb ?? 0, dbPath: options.dynamoDbPath });
    const endpoints = { sqs: fauxqs.url, s3: fauxqs.url, dynamodb: dynamo.endpoint };
    clients = createLocalClients(endpoints);
    const { queueUrls, dlqUrls } = await createQueues(clients.sqs, topology);
    if (options.ledgerTable === 'existing') await checkLedgerIndexes(clients.dynamodb, LOCAL_TABLE_NAME);
    else await createLedgerTable(clients.dynamodb, LOCAL_TABLE_NAME);
    await clients.s3.send(new CreateBucketCommand({ Bucket: LOCAL_DIFF_BUCKET }));
    return {
      endpoints,
      dynamoDb,
      topology,
      queueUrls,
      dlqUrls,
      tableName: LOCAL_TABLE_NAME,
      bucketName: LOCAL_DIFF_BUCKET,
      clients,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

export interface DynamoDbServer {
  readonly endpoint: string;
  stop(): Promise<void>;
}

/**
 * One DynamoDB emulator on 127.0.0.1, empty or over the files at `dbPath` (each emulator keeps
 * its own: a ledger persisted by one is not seen by the other).
 */
export async function startDynamoDb(
  emulator: DynamoDbEmulator,
  options: { port: number; dbPath?: string },
): Promise<DynamoDbServer> {
  if (emulator === 'dynamodb-local') return startDynamoDbLocal(options);
  const server = await listen(
    dynalite({ path: options.dbPath, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 }),
    options.port,
  );
  return { endpoint: serverUrl(server), stop: () => closeServer(server) };
}

async function createQueues(sqs: SQSClient, topology: readonly QueueSpec[]) {
  const queueUrls: Record<string, string> = {};
  const dlqUrls: Record<string, string> = {};
  for (const spec of topology) {
    const fifoAttributes: Record<string, string> = spec.fifo
      ? {
          FifoQueue: 'true',
          ContentBasedDeduplication: 'false',
          DeduplicationScope: 'messageGroup',
          FifoThroughputLimit: 'perMessageGroupId',
        }
      : {};
    const dlqUrl = await createQueue(sqs, queueName(spec.dlqName, spec.fifo), {
      ...fifoAttributes,
      MaximumMessageSize: String(MAX_MESSAGE_BYTES),
      MessageRetentionPeriod: String(DLQ_RETENTION_DAYS * DAY_SECONDS),
    });
    const dlqArn = await queueArn(sqs, dlqUrl);
    queueUrls[spec.name] = await createQueue(sqs, queueName(spec.name, spec.fifo), {
      ...fifoAttributes,
      MaximumMessageSize: String(MAX_MESSAGE_BYTES),
      MessageRetentionPeriod: String(QUEUE_RETENTION_DAYS * DAY_SECONDS),
      VisibilityTimeout: String(spec.visibilityTimeoutSeconds),
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: spec.maxReceiveCount }),
    });
    dlqUrls[spec.name] = dlqUrl;
  }
  return { queueUrls, dlqUrls };
}

async function createQueue(sqs: SQSClient, name: string, attributes: Record<string, string>): Promise<string> {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
  if (!QueueUrl) throw new Error(`CreateQueue ${name} returned no QueueUrl`);
  return QueueUrl;
}

async function queueArn(sqs: SQSClient, queueUrl: string): Promise<string> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
  );
  const arn = Attributes?.QueueArn;
  if (!arn) throw new Error(`GetQueueAttributes ${queueUrl} returned no QueueArn`);
  return arn;
}

/** The ledger table as lib/ defines it; an existing table (persisted state) is kept. */
/** Each index as lib/constructs/ledger.ts declares it: key types and projection. */
function ledgerIndexes() {
  const { workspaceIndex, listIndex, dueIndex } = LEDGER_TABLE;
  return [
    { ...workspaceIndex, sortType: 'N' as const, projection: { ProjectionType: 'ALL' as const } },
    {
      ...listIndex,
      sortType: 'S' as const,
      projection: { ProjectionType: 'INCLUDE' as const, NonKeyAttributes: [...listIndex.projected] },
    },
    { ...dueIndex, sortType: 'N' as const, projection: { ProjectionType: 'ALL' as const } },
  ];
}

async function createLedgerTable(dynamodb: DynamoDBDocumentClient, tableName: string): Promise<void> {
  const { partitionKey } = LEDGER_TABLE;
  const indexes = ledgerIndexes();
  try {
    await dynamodb.send(
      new CreateTableCommand({
        TableName: tableName,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [
          { AttributeName: partitionKey, AttributeType: 'S' },
          ...indexes.flatMap((index) => [
            { AttributeName: index.partitionKey, AttributeType: 'S' as const },
            { AttributeName: index.sortKey, AttributeType: index.sortType },
          ]),
        ],
        KeySchema: [{ AttributeName: partitionKey, KeyType: 'HASH' }],
        GlobalSecondaryIndexes: indexes.map((index) => ({
          IndexName: index.name,
          KeySchema: [
            { AttributeName: index.partitionKey, KeyType: 'HASH' as const },
            { AttributeName: index.sortKey, KeyType: 'RANGE' as const },
          ],
          Projection: index.projection,
        })),
      }),
    );
    await untilActive(dynamodb, tableName);
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
    await checkLedgerIndexes(dynamodb, tableName);
  }
}

/**
 * dynalite answers CreateTable with the table CREATING and makes it ACTIVE on a timer (even at 0
 * ms), refusing reads until then: a start that reads its ledger at once must wait. A few polls; the
 * SDK's waiter polls once a second at the least.
 */
async function untilActive(dynamodb: DynamoDBDocumentClient, tableName: string): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const { Table } = await dynamodb.send(new DescribeTableCommand({ TableName: tableName }));
    if (Table?.TableStatus === 'ACTIVE') return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`the local ledger table ${tableName} did not become ACTIVE`);
}

/** An existing ledger table (DescribeTable: ResourceNotFoundException without one) has this version's indexes. */
async function checkLedgerIndexes(dynamodb: DynamoDBDocumentClient, tableName: string): Promise<void> {
  // A persisted ledger from before an index existed: dynalite cannot add an index to a table.
  const { Table } = await dynamodb.send(new DescribeTableCommand({ TableName: tableName }));
  const present = new Set((Table?.GlobalSecondaryIndexes ?? []).map((i) => i.IndexName));
  const missing = ledgerIndexes()
    .filter((index) => !present.has(index.name))
    .map((index) => index.name);
  if (missing.length > 0)
    throw new Error(
      `the persisted local ledger lacks the index ${missing.join(', ')} of this version: start again with --reset`,
    );
}

interface FauxqsModule {
  buildApp(options: { logger: boolean }): {
    listen(options: { host: string; port: number }): Promise<string>;
    close(): Promise<void>;
  };
}

/**
 * fauxqs is ESM-only and exports only an `import` condition. TypeScript compiles `import()` to
 * `require()` under ts-jest, and jest's own dynamic import needs --experimental-vm-modules, so the
 * import runs in a script compiled by Node's own loader (USE_MAIN_CONTEXT_DEFAULT_LOADER, Node
 * >= 20.12): the same code path under jest, tsx and plain node.
 */
async function startFauxqs(port: number): Promise<{ url: string; close(): Promise<void> }> {
  const nativeImport = new vm.Script('(specifier) => import(specifier)', {
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  }).runInThisContext() as (specifier: string) => Promise<FauxqsModule>;
  const { buildApp } = await nativeImport(fauxqsEntryUrl());
  const app = buildApp({ logger: false });
  const url = await app.listen({ host: LOOPBACK, port });
  return { url, close: () => app.close() };
}

/**
 * The absolute URL of fauxqs' ESM entry, found from this file's location: a bare `fauxqs`
 * specifier would resolve from the working directory and fail when the CLI runs elsewhere.
 */
function fauxqsEntryUrl(): string {
  for (const dir of require.resolve.paths('fauxqs') ?? []) {
    const manifest = path.join(dir, 'fauxqs', 'package.json');
    if (!existsSync(manifest)) continue;
    const { exports } = JSON.parse(readFileSync(manifest, 'utf8')) as {
      exports: { '.': { import: { default: string } } };
    };
    return pathToFileURL(path.join(dir, 'fauxqs', exports['.'].import.default)).href;
  }
  throw new Error('the fauxqs package is not installed: run npm ci');
}

async function listen(server: Server, port: number): Promise<Server> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, LOOPBACK, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

function serverUrl(server: Server): string {
  const { address, port } = server.address() as AddressInfo;
  return `http://${address}:${port}`;
}

function closeServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  // Keep-alive sockets of destroyed SDK clients would otherwise hold close() open.
  server.closeAllConnections();
  return closed;
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let result: Promise<void> | undefined;
  return () => (result ??= fn());
}
