/**
 * Hostile envelopes and ids: a message that is not a job of the contract (contract/job-types.ts,
 * src/core/envelope.ts) is refused as INVALID_JOB on the first delivery, naming the field; nothing
 * is recorded under an id that does not parse, the remote is untouched (harness.ts).
 */
import { applyPatchJob, hostileSuite, type HostileRow } from './harness';

const withEnvelope =
  (envelope: Record<string, unknown>): HostileRow['message'] =>
  (ws) =>
    applyPatchJob(ws, {}, envelope);
/** The exact body text, under a job id of the row's own for the message attributes. */
const body =
  (text: string): HostileRow['message'] =>
  (ws) => ({ jobId: `hostile-${ws.workspaceId}`, body: text });

const ROWS: HostileRow[] = [
  {
    what: 'a job id that climbs directories',
    message: withEnvelope({ jobId: '../../etc/passwd' }),
    reason: 'INVALID_JOB',
    says: /jobId must be 1-64 characters/,
  },
  {
    what: 'a job id of 65 characters',
    message: withEnvelope({ jobId: `j${'x'.repeat(64)}` }),
    reason: 'INVALID_JOB',
    says: /jobId must be 1-64 characters/,
  },
  {
    what: 'a job id with a line break',
    message: withEnvelope({ jobId: 'job\nAgent-Job-Id: other' }),
    reason: 'INVALID_JOB',
    says: /jobId must be 1-64 characters/,
  },
  {
    what: 'a job id starting with "-"',
    message: withEnvelope({ jobId: '-rf' }),
    reason: 'INVALID_JOB',
    says: /jobId must be 1-64 characters .* starting with a letter or digit/,
  },
  {
    what: 'a tenant id with a "#" (a key separator)',
    message: withEnvelope({ tenantId: 'tenant#ws#x' }),
    reason: 'INVALID_JOB',
    says: /tenantId must be 1-64 characters/,
  },
  {
    what: 'a job type the catalog does not have',
    message: withEnvelope({ type: 'rm_rf' }),
    reason: 'INVALID_JOB',
    says: /type must be one of/,
  },
  {
    what: 'an unknown envelope field',
    message: withEnvelope({ pin: { sha: 'a'.repeat(40) } }),
    reason: 'INVALID_JOB',
    says: /invalid job envelope: \(body\): Unrecognized key: "pin"/,
  },
  {
    what: 'no payload',
    message(ws) {
      const { payload: _payload, ...envelope } = applyPatchJob(ws).body as Record<string, unknown>;
      return { jobId: String(envelope.jobId), body: envelope };
    },
    reason: 'INVALID_JOB',
    says: /invalid job envelope: payload: is required: an object with the fields of its job type$/,
  },
  {
    what: 'an unknown payload field',
    message: (ws) => applyPatchJob(ws, { command: 'rm -rf /' }),
    reason: 'INVALID_JOB',
    says: /invalid apply_patch payload: payload: Unrecognized key: "command"/,
  },
  {
    what: 'a createdAt with a time zone offset',
    message: withEnvelope({ createdAt: '2026-02-01T00:00:00+02:00' }),
    reason: 'INVALID_JOB',
    says: /createdAt must be an ISO-8601 UTC timestamp/,
  },
  {
    what: 'a createdAt that is no date',
    message: withEnvelope({ createdAt: 'yesterday' }),
    reason: 'INVALID_JOB',
    says: /createdAt must be an ISO-8601 UTC timestamp/,
  },
  {
    what: 'a body that is a JSON array',
    message: body('[]'),
    reason: 'INVALID_JOB',
    says: /invalid job envelope: \(body\): Invalid input: expected object, received array/,
  },
  { what: 'a body that is JSON null', message: body('null'), reason: 'INVALID_JOB', says: /invalid job envelope/ },
  {
    what: 'a body that is a JSON string',
    message: body('"apply_patch"'),
    reason: 'INVALID_JOB',
    says: /invalid job envelope/,
  },
];

describe('hostile envelopes and ids (sequencer, first delivery)', () => {
  const suite = hostileSuite();

  it.each(ROWS.map((row) => [row.what, row] as const))('%s', async (_what, row) => {
    await suite.expectRefusedOnFirstDelivery(row);
  });
});
