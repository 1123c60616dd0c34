/**
 * At start, the local platform ends the leases its previous run left behind. One platform runs per
 * state directory (platform.json says which), and only its workers hold leases, so a lease found
 * at start belongs to a worker that died with the last run (`kill -9`, a crash, a power cut). Its
 * job would otherwise stay claimed until the lease runs out (the worker's timeout: up to 15
 * minutes), and a re-sent job would wait that long. On AWS nothing like this happens: a dead
 * Lambda's message comes back after its visibility timeout and the lease has run out by then.
 *
 * The jobs themselves are not re-sent: their messages died with the in-memory queues, and the
 * ledger holds no payloads (a diff can exceed an item). They are returned so the platform can say
 * how many need re-sending (`agent-jobs unfinished` lists them).
 */
import { LeaseLostError } from '../../src/core/errors';
import { isLeaseLive } from '../../src/core/ledger';
import type { JobRecord, Ledger } from '../../src/core/ports';

export async function releaseOrphanedLeases(ledger: Ledger, now: number): Promise<JobRecord[]> {
  const unfinished = await ledger.listUnfinished();
  for (const job of unfinished) {
    if (job.status !== 'IN_FLIGHT' || job.leaseOwner === undefined || !isLeaseLive(job, now)) continue;
    await ledger.release({ jobId: job.jobId, owner: job.leaseOwner, now }).catch((error: unknown) => {
      // Finished or taken over since the scan: nothing left to release.
      if (!(error instanceof LeaseLostError)) throw error;
    });
  }
  return unfinished;
}
