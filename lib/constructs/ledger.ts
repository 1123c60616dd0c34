/**
 * The ledger: the single DynamoDB table that makes every job exactly-once in effect.
 *
 * Default settings:
 * - On-demand billing (traffic follows agents, not a schedule), TTL on `LEDGER_TABLE.ttlAttribute`,
 *   point-in-time recovery, deletion retained and deletion protection on: the ledger is the record
 *   of what ran, and no environment setting removes it with the stack.
 * - Encryption with the AWS-managed key (aws/dynamodb): key use shows in CloudTrail and there is no
 *   key policy or rotation to run; a customer-managed key would only add cost, since no principal
 *   outside this account reads the table.
 * - The `byWorkspace` index (LEDGER_TABLE.workspaceIndex) lists a workspace's jobs in order.
 * - The sparse `byList` index (LEDGER_TABLE.listIndex) lists every workspace, a workspace's
 *   unfinished jobs and what waits on a DLQ, for the operator's CLI. It projects only attributes
 *   that never change, so a write that does not move a record between lists does not write it.
 * - The sparse `byDueTime` index (LEDGER_TABLE.dueIndex) lists the command-stage jobs the build
 *   reconciler must look at (only those records carry its key, so it stays small).
 */
import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { ENV } from '../../contract/runtime-env';
import { LEDGER_TABLE } from '../../contract/topology';

/** What a worker does with the ledger: conditional claims and completions (UpdateItem) and consistent reads. */
const TABLE_ACTIONS: readonly string[] = ['dynamodb:GetItem', 'dynamodb:UpdateItem'];
/** A workspace's jobs in order come from the index. */
const INDEX_ACTIONS: readonly string[] = ['dynamodb:Query'];
/**
 * Indexes whose listings the ledger reads back from the table, every listed record in consistent
 * BatchGetItem requests, since an index lags its items (listDue in src/adapters/dynamodb-ledger.ts):
 * a function bound to one of them needs BatchGetItem on the table too.
 */
const READ_BACK_INDEXES: ReadonlySet<string> = new Set([LEDGER_TABLE.dueIndex.name]);

export interface LedgerProps {
  /** @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
}

export class Ledger extends Construct {
  readonly table: dynamodb.Table;

  constructor(scope: Construct, id: string, props: LedgerProps = {}) {
    super(scope, id);
    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: LEDGER_TABLE.partitionKey, type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: LEDGER_TABLE.ttlAttribute,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
      deletionProtection: true,
    });
    const index = LEDGER_TABLE.workspaceIndex;
    this.table.addGlobalSecondaryIndex({
      indexName: index.name,
      partitionKey: { name: index.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: index.sortKey, type: dynamodb.AttributeType.NUMBER },
    });
    const lists = LEDGER_TABLE.listIndex;
    this.table.addGlobalSecondaryIndex({
      indexName: lists.name,
      partitionKey: { name: lists.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: lists.sortKey, type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.INCLUDE,
      nonKeyAttributes: [...lists.projected],
    });
    const due = LEDGER_TABLE.dueIndex;
    this.table.addGlobalSecondaryIndex({
      indexName: due.name,
      partitionKey: { name: due.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: due.sortKey, type: dynamodb.AttributeType.NUMBER },
    });
  }

  /**
   * Grants `fn` the ledger operations on the table and on the one index it queries (by exact ARN:
   * Table.grant would add `index/*`), and names the table in its environment. Workers query
   * `byWorkspace`; the build reconciler only `byDueTime`, whose listings it reads back.
   */
  bind(fn: lambda.Function, index: { readonly name: string } = LEDGER_TABLE.workspaceIndex): void {
    const readBack = READ_BACK_INDEXES.has(index.name) ? ['dynamodb:BatchGetItem'] : [];
    iam.Grant.addToPrincipal({
      grantee: fn,
      actions: [...readBack, ...TABLE_ACTIONS],
      resourceArns: [this.table.tableArn],
    });
    iam.Grant.addToPrincipal({
      grantee: fn,
      actions: [...INDEX_ACTIONS],
      resourceArns: [`${this.table.tableArn}/index/${index.name}`],
    });
    fn.addEnvironment(ENV.ledgerTable, this.table.tableName);
  }
}
