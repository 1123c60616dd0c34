/**
 * The DynamoDB ledger against dynalite: the ledger contract (test/support/ledger-contract.ts, the
 * same cases the in-memory ledger passes), i.e. the conditional writes and the reads after a
 * refused condition, under real concurrency. Races between a refused write and its read are staged
 * with SDK middleware on a client of the test's own.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { DynamoDbLedger } from '../../src/adapters/dynamodb-ledger';
import { localClientConfig } from '../../src/local/emulators';
import { withEmulators } from '../support/emulators';
import { describeLedgerContract } from '../support/ledger-contract';

describe('DynamoDbLedger', () => {
  const emulators = withEmulators();
  let client: DynamoDBDocumentClient | undefined;

  afterAll(() => client?.destroy());

  describeLedgerContract('DynamoDbLedger on dynalite', () => {
    const base = new DynamoDBClient(localClientConfig(emulators().endpoints.dynamodb));
    client = DynamoDBDocumentClient.from(base, { marshallOptions: { removeUndefinedValues: true } });
    let between: (() => Promise<void>) | undefined;
    // Runs the staged race once, after the next refused conditional write, before the adapter's read.
    client.middlewareStack.add(
      (next) => async (args) => {
        try {
          return await next(args);
        } catch (error) {
          const race = between;
          if (race && (error as Error).name === 'ConditionalCheckFailedException') {
            between = undefined;
            await race();
          }
          throw error;
        }
      },
      { step: 'initialize', name: 'stagedRace' },
    );
    return {
      ledger: new DynamoDbLedger({ client, tableName: emulators().tableName, retentionDays: 30 }),
      onNextRefusedClaim: (race) => {
        between = race;
      },
    };
  });
});
