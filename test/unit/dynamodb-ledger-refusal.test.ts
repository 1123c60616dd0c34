/**
 * How DynamoDbLedger reads the item a refused write comes back with, in both forms an SDK can hand
 * it over. lib-dynamodb passes it through in attribute-value form today (the DynamoDB Local lane,
 * test/integration/ledger.test.ts, shows it against AWS's own emulator); an SDK that unmarshalled
 * it itself would hand over plain values, and the Lambda runtime brings its own SDK. No emulator
 * returns the second form, so the document client is mocked here (aws-sdk-client-mock).
 */
import { ConditionalCheckFailedException, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { DynamoDbLedger } from '../../src/adapters/dynamodb-ledger';
import { jobDigest } from '../../src/core/envelope';
import { claimOf, newJob } from '../support/ledger-contract';

const client = DynamoDBDocumentClient.from(
  new DynamoDBClient({ region: 'us-east-1', credentials: { accessKeyId: 'unused', secretAccessKey: 'unused' } }),
);
const dynamodb = mockClient(client);
afterEach(() => dynamodb.reset());
afterAll(() => client.destroy());

const job = newJob();
const stored = {
  pk: `job#${job.jobId}`,
  jobId: job.jobId,
  workspaceId: job.workspaceId,
  tenantId: job.tenantId,
  type: job.type,
  status: 'SUCCEEDED',
  digest: jobDigest(job),
  attempt: 1,
  result: { exitCode: 0, tags: ['a', 'b'] },
  createdAt: job.createdAt,
  updatedAt: job.createdAt,
};

it.each([
  ['in attribute-value form, as lib-dynamodb passes it', marshall(stored)],
  ['already unmarshalled, should an SDK do it itself', stored],
])('answers a duplicate from the refused item %s, without a read', async (_form, item) => {
  dynamodb.on(UpdateCommand).rejects(
    new ConditionalCheckFailedException({
      message: 'The conditional request failed',
      $metadata: {},
      Item: item as never,
    }),
  );
  const ledger = new DynamoDbLedger({ client, tableName: 'ledger', retentionDays: 30 });

  const outcome = await ledger.claim(claimOf(job));

  expect(outcome).toEqual({
    kind: 'duplicate',
    record: expect.objectContaining({ status: 'SUCCEEDED', attempt: 1, result: { exitCode: 0, tags: ['a', 'b'] } }),
  });
  expect(outcome).not.toHaveProperty('record.pk');
  expect(dynamodb.commandCalls(UpdateCommand)[0]?.args[0].input).toMatchObject({
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  });
  expect(dynamodb.commandCalls(GetCommand)).toHaveLength(0);
});
