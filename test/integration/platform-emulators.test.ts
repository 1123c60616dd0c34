import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { connect, createServer, type AddressInfo } from 'node:net';
import * as path from 'node:path';
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type Message,
} from '@aws-sdk/client-sqs';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { MAX_MESSAGE_BYTES } from '../../contract/runtime-env';
import { LEDGER_TABLE, platformQueues, queueTopology } from '../../contract/topology';
import {
  DYNAMODB_EMULATOR_ENV,
  dynamoDbEmulatorOf,
  LOCAL_TABLE_NAME,
  startDynamoDb,
  startEmulators,
} from '../../tools/local/emulators';
import { withEmulators } from '../support/emulators';
import { eventually } from '../support/eventually';

describe('local emulators', () => {
  const env = withEmulators();
  const fifoSpec = queueTopology().find((spec) => spec.fifo);
  if (!fifoSpec) throw new Error('the topology has no FIFO queue');

  async function attributes(queueUrl: string): Promise<Record<string, string>> {
    const { Attributes } = await env().clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }),
    );
    return Attributes ?? {};
  }

  async function receive(queueUrl: string, visibilityTimeout?: number): Promise<Message[]> {
    const { Messages } = await env().clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        VisibilityTimeout: visibilityTimeout,
        MessageSystemAttributeNames: ['All'],
      }),
    );
    return Messages ?? [];
  }

  async function sendFifo(group: string, body: string): Promise<void> {
    await env().clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: env().queueUrls[fifoSpec!.name],
        MessageBody: body,
        MessageGroupId: group,
        MessageDeduplicationId: body,
      }),
    );
  }

  it('creates every queue of the platform (the build-events queue too) with its DLQ, visibility and redrive settings', async () => {
    expect(platformQueues().map((q) => q.name)).toContain('build-events');
    for (const spec of platformQueues()) {
      const queueUrl = env().queueUrls[spec.name];
      const dlqUrl = env().dlqUrls[spec.name];
      expect(queueUrl).toBeDefined();
      expect(dlqUrl).toBeDefined();
      const queue = await attributes(queueUrl!);
      const dlq = await attributes(dlqUrl!);
      expect(queue.VisibilityTimeout).toBe(String(spec.visibilityTimeoutSeconds));
      expect(queue.MaximumMessageSize).toBe(String(MAX_MESSAGE_BYTES));
      expect(JSON.parse(queue.RedrivePolicy ?? '{}')).toEqual({
        deadLetterTargetArn: dlq.QueueArn,
        maxReceiveCount: spec.maxReceiveCount,
      });
      for (const attrs of [queue, dlq]) {
        if (spec.fifo) {
          expect(attrs).toMatchObject({
            FifoQueue: 'true',
            ContentBasedDeduplication: 'false',
            DeduplicationScope: 'messageGroup',
            FifoThroughputLimit: 'perMessageGroupId',
          });
        } else {
          expect(attrs.FifoQueue).toBeUndefined();
        }
      }
    }
  });

  // By name: DynamoDB documents no order for a table's indexes (DynamoDB Local does not keep the creation order).
  it('creates the ledger table with the byWorkspace, byList and byDueTime indexes', async () => {
    const { Table } = await env().clients.dynamodb.send(new DescribeTableCommand({ TableName: env().tableName }));
    expect(Table?.KeySchema).toEqual([{ AttributeName: LEDGER_TABLE.partitionKey, KeyType: 'HASH' }]);
    const keysByIndex = Object.fromEntries(
      (Table?.GlobalSecondaryIndexes ?? []).map((index) => [index.IndexName, index.KeySchema]),
    );
    expect(keysByIndex).toEqual(
      Object.fromEntries(
        [LEDGER_TABLE.workspaceIndex, LEDGER_TABLE.listIndex, LEDGER_TABLE.dueIndex].map((index) => [
          index.name,
          [
            { AttributeName: index.partitionKey, KeyType: 'HASH' },
            { AttributeName: index.sortKey, KeyType: 'RANGE' },
          ],
        ]),
      ),
    );
  });

  // The whole of 127.0.0.0/8 reaches this machine, but a socket bound to 127.0.0.1 answers there
  // only: what listens on every interface (DynamoDB Local's own command line) answers 127.0.0.2 too.
  it('listens on 127.0.0.1 alone, for SQS and DynamoDB', async () => {
    for (const endpoint of [env().endpoints.sqs, env().endpoints.dynamodb]) {
      const { hostname, port } = new URL(endpoint);
      expect(hostname).toBe('127.0.0.1');
      await expect(connected('127.0.0.2', Number(port))).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    }
  });

  it('serves the diff bucket path-style', async () => {
    const { s3 } = env().clients;
    await s3.send(new PutObjectCommand({ Bucket: env().bucketName, Key: 'diffs/x', Body: 'hello' }));
    const object = await s3.send(new GetObjectCommand({ Bucket: env().bucketName, Key: 'diffs/x' }));
    expect(await object.Body?.transformToString()).toBe('hello');
  });

  it('holds a FIFO group while one of its messages is in flight, and keeps groups independent', async () => {
    const queueUrl = env().queueUrls[fifoSpec.name]!;
    await sendFifo('ws#lock-a', 'a1');
    await sendFifo('ws#lock-a', 'a2');
    await sendFifo('ws#lock-b', 'b1');

    const first = await receive(queueUrl);
    expect(first.map((m) => m.Body).sort()).toEqual(['a1', 'b1']);
    expect(await receive(queueUrl)).toEqual([]);

    const a1 = first.find((m) => m.Body === 'a1');
    await env().clients.sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: a1?.ReceiptHandle }));
    const second = await receive(queueUrl);
    expect(second.map((m) => m.Body)).toEqual(['a2']);

    for (const message of [...second, ...first.filter((m) => m !== a1)]) {
      await env().clients.sqs.send(
        new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }),
      );
    }
  });

  it('moves a message to the DLQ after maxReceiveCount receives', async () => {
    const queueUrl = env().queueUrls[fifoSpec.name]!;
    await sendFifo('ws#redrive', 'poison');
    for (let attempt = 1; attempt <= fifoSpec.maxReceiveCount; attempt++) {
      const [message] = await receive(queueUrl, 0);
      expect(message?.Body).toBe('poison');
      expect(message?.Attributes?.ApproximateReceiveCount).toBe(String(attempt));
    }
    expect(await receive(queueUrl, 0)).toEqual([]);
    const dead = await receive(env().dlqUrls[fifoSpec.name]!);
    expect(dead.map((m) => [m.Body, m.Attributes?.MessageGroupId])).toEqual([['poison', 'ws#redrive']]);
  });
});

/** Resolves once a TCP connection to host:port is open (and closes it), rejects with the socket's error. */
function connected(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    socket.once('error', reject);
  });
}

describe('a DynamoDB emulator on a port in use', () => {
  // The platform keeps its ports across restarts and explains a taken one (stable-ports.ts) by this code and port.
  it('fails to start with EADDRINUSE and the port', async () => {
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    const { port } = squatter.address() as AddressInfo;
    try {
      await expect(startDynamoDb(dynamoDbEmulatorOf(), { port })).rejects.toMatchObject({ code: 'EADDRINUSE', port });
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });
});

describe('a DynamoDB emulator whose process is killed', () => {
  // A platform killed with `kill -9` must not leave DynamoDB Local (a process of its own) holding
  // the port its restart takes again; in process, dynalite dies with it anyway.
  it('stops listening', async () => {
    const start = `require(${JSON.stringify(path.resolve(__dirname, '../../tools/local/emulators'))}).startDynamoDb(process.env.${DYNAMODB_EMULATOR_ENV} || 'dynalite', { port: 0 }).then((db) => console.log(db.endpoint))`;
    const child = spawn(process.execPath, ['--require', 'tsx/cjs', '--eval', start], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [line] = (await once(child.stdout, 'data')) as [Buffer];
    const port = Number(new URL(line.toString().trim()).port);
    await connected('127.0.0.1', port);

    child.kill('SIGKILL');
    await once(child, 'exit');

    await eventually(
      () =>
        connected('127.0.0.1', port).then(
          () => 'open',
          (error: NodeJS.ErrnoException) => error.code,
        ),
      (state) => state === 'ECONNREFUSED',
      { what: `port ${port} to close` },
    );
  });
});

describe('local emulators on disk', () => {
  it('refuse a persisted ledger that lacks an index of this version, naming it and the remedy', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-dynamodb-'));
    try {
      // A ledger written by an older version: the table with only the workspace index.
      const server = await startDynamoDb(dynamoDbEmulatorOf(), { port: 0, dbPath: dir });
      const client = new DynamoDBClient({
        endpoint: server.endpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'l', secretAccessKey: 'l' },
      });
      const index = LEDGER_TABLE.workspaceIndex;
      await client.send(
        new CreateTableCommand({
          TableName: LOCAL_TABLE_NAME,
          BillingMode: 'PAY_PER_REQUEST',
          AttributeDefinitions: [
            { AttributeName: 'pk', AttributeType: 'S' },
            { AttributeName: index.partitionKey, AttributeType: 'S' },
            { AttributeName: index.sortKey, AttributeType: 'N' },
          ],
          KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
          GlobalSecondaryIndexes: [
            {
              IndexName: index.name,
              KeySchema: [
                { AttributeName: index.partitionKey, KeyType: 'HASH' },
                { AttributeName: index.sortKey, KeyType: 'RANGE' },
              ],
              Projection: { ProjectionType: 'ALL' },
            },
          ],
        }),
      );
      client.destroy();
      await server.stop();

      await expect(startEmulators({ dynamoDbPath: dir })).rejects.toThrow(
        `lacks the index ${LEDGER_TABLE.listIndex.name}, ${LEDGER_TABLE.dueIndex.name} of this version: start again with --reset`,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keep ledger items across a restart', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-dynamodb-'));
    try {
      const first = await startEmulators({ dynamoDbPath: dir });
      await first.clients.dynamodb.send(
        new PutCommand({ TableName: first.tableName, Item: { pk: 'ws#kept', state: 'ACTIVE' } }),
      );
      await first.stop();

      const second = await startEmulators({ dynamoDbPath: dir });
      try {
        const { Item } = await second.clients.dynamodb.send(
          new GetCommand({ TableName: second.tableName, Key: { pk: 'ws#kept' }, ConsistentRead: true }),
        );
        expect(Item).toEqual({ pk: 'ws#kept', state: 'ACTIVE' });
      } finally {
        await second.stop();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
