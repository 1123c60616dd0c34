/**
 * Message attributes on the wire: what the producer, the consumers, the DLQ moves and the CLI's
 * triage and redrive agree on. Plain data and one pure helper, so every side imports it.
 */

/**
 * Set on a message an operator sends back from a DLQ (`dlq redrive`, `workspace unblock
 * --replay`); its value is the DLQ message id. Only such a delivery may run a FAILED or SKIPPED
 * job again (docs/decisions.md §2).
 */
export const REDRIVE_ATTRIBUTE = 'redrive';

/** Added to a message moved to a DLQ, so an operator can triage without reading the ledger. */
export const DLQ_ATTRIBUTES = {
  /** The permanent reason code (INVALID_JOB, CONFLICT, SKIPPED, ...). */
  reason: 'reason',
  /** The human-readable message, cut to a length attributes can carry. */
  errorMessage: 'errorMessage',
} as const;

/** A string attribute as SQS SendMessage takes it (structurally the SDK's MessageAttributeValue). */
export interface StringAttributeValue {
  readonly DataType: 'String';
  readonly StringValue: string;
}

/** String message attributes as SendMessage wants them (the producer, the DLQ moves, the CLI). */
export function stringAttributes(values: Readonly<Record<string, string>>): Record<string, StringAttributeValue> {
  return Object.fromEntries(Object.entries(values).map(([name, value]) => [name, { DataType: 'String', StringValue: value }]));
}
