/**
 * At start, the local platform announces the outcomes its previous run recorded but was killed
 * before announcing. A worker writes the verdict, then publishes the event, then deletes the
 * message; a `kill -9` between the write and the event leaves an outcome nobody announces. On AWS
 * the message, never deleted, comes back and its redelivery publishes the recorded outcome again;
 * locally the queues died with the process, and an agent re-sending through the CLI's door is told
 * the job's status without a send. So the outcomes recorded since the event log began that the log
 * lacks are published now (events are at least once).
 *
 * A command-stage verdict not reported yet (still on the due index) is left to the reconciler,
 * which reports it with its DLQ copy and marks it reported.
 */
import type { EventType } from '../../contract/runtime-env';
import type { JsonlEventLog } from '../../src/adapters/events';
import { EVENT_OF, eventDetail, recordedVerdict } from '../../src/core/pipeline';
import type { JobLogger, Ledger } from '../../src/core/ports';

/** The events that announce an outcome: every event a verdict has (EVENT_OF). */
const OUTCOME_EVENTS: ReadonlySet<EventType> = new Set(
  Object.values(EVENT_OF).flatMap((outcome) => (outcome.event ? [outcome.event] : [])),
);

/** Publishes the missing outcome events; returns the ids of the jobs it announced. */
export async function announceMissedOutcomes(
  ledger: Ledger,
  events: JsonlEventLog,
  logger: JobLogger,
): Promise<string[]> {
  const { events: logged } = await events.readFrom(0);
  const first = logged[0];
  // No log yet (a fresh state directory, or one whose log was removed): nothing to compare with.
  if (first === undefined) return [];
  const announced = new Set(logged.filter((e) => OUTCOME_EVENTS.has(e.type)).map((e) => e.detail['jobId']));
  const missed = (await ledger.listFinishedSince(Date.parse(first.time))).filter(
    (record) => !announced.has(record.jobId) && record.dueAt === undefined,
  );
  for (const record of missed) {
    const verdict = recordedVerdict(record);
    const event = verdict && EVENT_OF[verdict.status].event;
    if (verdict && event) await events.publish(event, eventDetail(record, verdict, record.attempt));
  }
  if (missed.length > 0)
    logger.warn('outcomes the last run recorded but did not announce were published', {
      jobIds: missed.map((r) => r.jobId),
    });
  return missed.map((r) => r.jobId);
}
