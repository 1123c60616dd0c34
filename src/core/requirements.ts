/**
 * A stage's gate: the verdicts its catalog declaration `requires` (contract/job-types.ts), judged
 * at the commit the sequencer pinned it to (docs/decisions.md, "A stage's requirements").
 *
 * For each required type, the last job of that type the workspace took before this one at the same
 * pinned commit decides: SUCCEEDED with a passing verdict lets the stage run; a failing verdict, a
 * failed or skipped job ends the stage with REQUIREMENT_FAILED, naming the job, its verdict and
 * commit; none at all ends it with REQUIREMENT_NOT_RUN; one without a verdict yet (its build running)
 * is a wait, not a failure: RetryAfterError, so the pipeline sends the message again for later and
 * holds neither a function nor a build meanwhile. A later patch moves the head, never the pin: the
 * judgement is always at the pinned commit.
 */
import { JOB_TYPES, type JobTypeDeclaration } from '../../contract/job-types';
import type { StageMessage } from './envelope';
import { PermanentJobError, RetryAfterError, type GateCheck } from './errors';
import type { JobRecord, Ledger } from './ports';

export type { GateCheck } from './errors';

/** Jobs read per page walking back through the workspace, and the most looked at. */
const PAGE = 25;
const MOST_LOOKED_AT = 500;

/** The types a job type requires (none for a type the catalog does not declare any for). */
export function requiredTypes(
  type: string,
  catalog: Readonly<Record<string, JobTypeDeclaration>> = JOB_TYPES,
): readonly string[] {
  return catalog[type]?.requires ?? [];
}

/** How a required job stands: a command stage's verdict reads as its summary ("tests failed"). */
function standing(record: JobRecord): { readonly verdict: string; readonly passed: boolean | undefined } {
  if (record.status === 'SUCCEEDED') {
    const verdict = record.result?.['verdict'];
    const summary = record.result?.['summary'];
    return {
      verdict: typeof summary === 'string' ? summary : record.status,
      passed: verdict === undefined || verdict === 'passed',
    };
  }
  if (record.status === 'FAILED' || record.status === 'SKIPPED')
    return { verdict: `${record.status} (${record.error?.reason ?? 'no reason'})`, passed: false };
  return { verdict: record.status, passed: undefined };
}

/**
 * The last job of each required type before `claimed` (its place in the workspace) at the pinned
 * commit, walking back from it until the patch that made that commit. Cancelled jobs do not count.
 */
async function lastAtCommit(
  ledger: Ledger,
  job: StageMessage,
  claimed: JobRecord,
  types: readonly string[],
): Promise<Map<string, JobRecord>> {
  const found = new Map<string, JobRecord>();
  let after = claimed.wsSeq;
  for (let looked = 0; looked < MOST_LOOKED_AT && found.size < types.length; looked += PAGE) {
    const page = await ledger.pageWorkspaceJobs(job.workspaceId, {
      order: 'newest',
      ...(after === undefined ? {} : { after }),
      limit: PAGE,
    });
    for (const record of page.jobs) {
      // The patch that made the pinned commit, or an earlier one: what comes before was pinned elsewhere.
      if (record.type === 'apply_patch' && record.status === 'SUCCEEDED') return found;
      if (record.jobId === job.jobId || record.status === 'CANCELLED' || record.pin?.sha !== job.pin.sha) continue;
      if (types.includes(record.type) && !found.has(record.type)) found.set(record.type, record);
    }
    if (!page.more) break;
    after = page.jobs.at(-1)?.wsSeq;
    if (after === undefined) break;
  }
  return found;
}

/**
 * Judges the stage's requirements at its pinned commit: the checks when all passed (empty when it
 * requires none); throws REQUIREMENT_FAILED / REQUIREMENT_NOT_RUN, or RetryAfterError to wait.
 */
export async function judgeRequirements(
  ledger: Ledger,
  job: StageMessage,
  claimed: JobRecord,
  types: readonly string[] = requiredTypes(job.type),
): Promise<GateCheck[]> {
  if (types.length === 0) return [];
  const sha = job.pin.sha;
  const found = await lastAtCommit(ledger, job, claimed, types);
  const missing = types.filter((type) => !found.has(type));
  if (missing.length > 0) {
    throw new PermanentJobError(
      'REQUIREMENT_NOT_RUN',
      `${job.type} requires ${missing.join(' and ')} at commit ${sha}, and no such job ran in workspace ${job.workspaceId} at that commit before it: nothing was done`,
    );
  }
  const checks = types.map((type) => {
    const record = found.get(type) as JobRecord;
    return {
      record,
      check: { type, jobId: record.jobId, verdict: standing(record).verdict, sha } satisfies GateCheck,
      passed: standing(record).passed,
    };
  });
  const failed = checks.find((c) => c.passed === false);
  if (failed) {
    throw new PermanentJobError(
      'REQUIREMENT_FAILED',
      `${job.type} requires ${failed.check.type} to pass at commit ${sha}: ${failed.check.jobId} says ${failed.check.verdict} there, so nothing was done`,
      { gate: [failed.check] },
    );
  }
  const pending = checks.filter((c) => c.passed === undefined);
  if (pending.length > 0) {
    const waits = pending.map((c) => `${c.check.jobId} (${c.check.type}, ${c.check.verdict})`).join(', ');
    throw new RetryAfterError('requirement-pending', `waiting for the verdict of ${waits} at commit ${sha}`);
  }
  return checks.map((c) => c.check);
}
