/**
 * What AWS would bill for the requests a benchmark counted: request counters (SDK middleware on
 * the clients the code under test uses) and the published on-demand prices they are multiplied by.
 *
 * Prices: US East (N. Virginia), on-demand, beyond the free tiers, looked up on 2026-12-01:
 * - DynamoDB on-demand: https://aws.amazon.com/dynamodb/pricing/on-demand/ - $0.625 per million
 *   write request units (one write of an item up to 1 KB, a refused conditional write included),
 *   $0.125 per million read request units (one strongly consistent read up to 4 KB; an eventually
 *   consistent read is half a unit). Current since the on-demand price cut of November 2024.
 * - SQS: https://aws.amazon.com/sqs/pricing/ - FIFO queues $0.50, standard queues $0.40 per million
 *   requests (each 64 KB chunk of a payload is one request; empty receives count).
 * - EventBridge: https://aws.amazon.com/eventbridge/pricing/ - custom events $1.00 per million
 *   (each 64 KB chunk is one event).
 * - Lambda: https://aws.amazon.com/lambda/pricing/ - $0.20 per million requests; Arm (the stack's
 *   architecture) $0.0000133334 per GB-second for the first 7.5 billion GB-seconds a month.
 * The same figures appear in third-party guides dated March and June 2026 (cloudburn.io,
 * factualminds.com, airbyte.com); the pricing pages render their tables client-side, so check them
 * before relying on these numbers.
 */
/** What the counter needs of an SDK v3 client: its middleware stack. */
type Handler = (args: { input: object }) => Promise<unknown>;
interface CountableClient {
  readonly middlewareStack: {
    add(
      middleware: (next: Handler, context: { commandName?: string }) => Handler,
      options: { step: 'initialize'; name: string; override: boolean },
    ): void;
  };
}

export const PRICES_USD = {
  dynamoWriteUnit: 0.625 / 1e6,
  dynamoReadUnit: 0.125 / 1e6,
  sqsFifoRequest: 0.5 / 1e6,
  sqsStandardRequest: 0.4 / 1e6,
  eventBridgeEvent: 1.0 / 1e6,
  lambdaRequest: 0.2 / 1e6,
  lambdaArmGbSecond: 0.0000133334,
} as const;

export const PRICES_AS_OF = '2026-12-01';

/** Requests by command name (`UpdateItem`, `SendMessage`, ...), and the DynamoDB units they use. */
export class RequestCounter {
  readonly byCommand = new Map<string, number>();
  /** Strongly consistent reads; eventually consistent ones are counted apart (half a unit each). */
  consistentReads = 0;
  eventualReads = 0;
  writes = 0;
  /** Conditional writes DynamoDB refused (billed like any write). */
  refusedWrites = 0;

  /** Counts every request `client` sends from now on. */
  attach(client: CountableClient): this {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const name = (context.commandName ?? '?').replace(/Command$/, '');
        this.byCommand.set(name, (this.byCommand.get(name) ?? 0) + 1);
        const input = args.input as { ConsistentRead?: boolean };
        if (DYNAMO_READS.has(name)) {
          if (input.ConsistentRead) this.consistentReads++;
          else this.eventualReads++;
        }
        if (DYNAMO_WRITES.has(name)) this.writes++;
        try {
          return await next(args);
        } catch (error) {
          if (DYNAMO_WRITES.has(name) && (error as Error).name === 'ConditionalCheckFailedException')
            this.refusedWrites++;
          throw error;
        }
      },
      { step: 'initialize', name: 'benchRequestCounter', override: true },
    );
    return this;
  }

  count(...commands: string[]): number {
    return commands.reduce((sum, c) => sum + (this.byCommand.get(c) ?? 0), 0);
  }

  /** DynamoDB read request units (items up to 4 KB). */
  get readUnits(): number {
    return this.consistentReads + this.eventualReads / 2;
  }

  reset(): void {
    this.byCommand.clear();
    this.consistentReads = this.eventualReads = this.writes = this.refusedWrites = 0;
  }
}

// Commands of the document client (Get, Put, ...) and of the base client (GetItem, PutItem, ...).
const DYNAMO_READS = new Set(['Get', 'GetItem', 'Query', 'Scan', 'BatchGet', 'BatchGetItem']);
const DYNAMO_WRITES = new Set(['Put', 'PutItem', 'Update', 'UpdateItem', 'Delete', 'DeleteItem']);

/** USD per million jobs of `perJob` units at `unitPrice` USD each. */
export function perMillionJobs(perJob: number, unitPrice: number): number {
  return perJob * unitPrice * 1e6;
}

export const usd = (value: number): string => `$${value.toFixed(value < 1 ? 3 : 2)}`;
