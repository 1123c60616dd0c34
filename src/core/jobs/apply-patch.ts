/**
 * apply_patch, the ordered lane's mutation: one commit on the workspace branch carrying the job's
 * trailer, pushed fast-forward only. The git adapter makes it idempotent in the repository itself
 * (a redelivery finds the trailer commit); the sequencer (src/core/sequencer.ts) runs it at the
 * job's turn and records the new head.
 */
import { inlineDiffBytes } from '../diff-wire';
import type { JobEnvelope } from '../envelope';
import { PermanentJobError } from '../errors';
import type { DiffReader, WorkspaceGit } from '../ports';
import type { OrderedJobProcessor } from '../sequencer';

export interface ApplyPatchDeps {
  readonly diffStore: DiffReader;
  readonly git: WorkspaceGit;
}

export function applyPatchProcessor(deps: ApplyPatchDeps): OrderedJobProcessor<'apply_patch'> {
  return {
    workspaceRepo: (job) => job.payload.repo,
    async mutate(job: JobEnvelope<'apply_patch'>) {
      const { payload } = job;
      // The diff's exact bytes, whichever form carried them (src/core/diff-wire.ts).
      const diff =
        inlineDiffBytes(payload) ?? (payload.diffRef ? await deps.diffStore.get(payload.diffRef) : undefined);
      if (diff === undefined)
        throw new PermanentJobError('INVALID_JOB', 'apply_patch has none of diff, diffBase64 or diffRef');
      const applied = await deps.git.commitPatch({
        repoUrl: payload.repo.url,
        branch: payload.repo.branch,
        diff,
        baseSha: payload.baseSha,
        jobId: job.jobId,
        message: payload.message,
        author: payload.author,
        createdAt: job.createdAt,
      });
      return {
        head: applied.commitSha,
        result: { commitSha: applied.commitSha, alreadyApplied: applied.alreadyApplied },
      };
    },
  };
}
