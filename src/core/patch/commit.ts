/**
 * The commit apply_patch writes: its fields checked again before any object is written (the
 * envelope checked them at the edge with the same rules, contract/git-objects.ts), so every commit
 * the platform pushes passes `git fsck --strict`, and the trailer that makes apply_patch idempotent
 * in the repository itself: before applying, the adapter looks for a commit carrying the job's
 * trailer between the branch head and the base.
 */
import {
  branchNameProblem,
  commitMessageProblem,
  commitTimeProblem,
  emailProblem,
  identityNameProblem,
} from '../../../contract/git-objects';
import { InvalidJobError } from '../errors';
import type { PatchCommitRequest } from '../ports';
import type { FileOperation } from './operations';
import { parsePatchOperations } from './parse';

const JOB_TRAILER = 'Agent-Job-Id';

/** The platform's identity when a job names no author. */
export const DEFAULT_AUTHOR = { name: 'agent-jobs', email: 'agent-jobs@users.noreply.github.com' } as const;

export interface CommitSignature {
  readonly name: string;
  readonly email: string;
  /** Seconds since the epoch. */
  readonly timestamp: number;
  readonly timezoneOffset: number;
}

export interface CommitFields {
  readonly message: string;
  readonly author: CommitSignature;
  readonly committer: CommitSignature;
}

/** What the adapter needs to write the commit, everything checked: no I/O happens before this. */
export interface PreparedPatchCommit {
  readonly operations: FileOperation[];
  readonly commit: CommitFields;
}

/** Validates a patch commit request (patch, branch, commit fields). Throws UNSAFE_PATCH or INVALID_JOB. */
export function preparePatchCommit(request: PatchCommitRequest): PreparedPatchCommit {
  const operations = parsePatchOperations(request.diff);
  refuse('branch', branchNameProblem(request.branch));
  return { operations, commit: commitFields(request) };
}

/**
 * Author and committer (the job's author, else the platform's) at the job's createdAt, so the
 * same base + diff + jobId give the same commit hash; the message carries the job's trailer.
 */
export function commitFields(
  request: Pick<PatchCommitRequest, 'message' | 'jobId' | 'author' | 'createdAt'>,
): CommitFields {
  const author = request.author ?? DEFAULT_AUTHOR;
  refuse('author.name', identityNameProblem(author.name));
  refuse('author.email', emailProblem(author.email));
  refuse('message', commitMessageProblem(request.message));
  refuse('createdAt', commitTimeProblem(request.createdAt));
  const signature = {
    name: author.name,
    email: author.email,
    timestamp: Math.floor(Date.parse(request.createdAt) / 1000),
    timezoneOffset: 0,
  };
  return { message: commitMessage(request.message, request.jobId), author: signature, committer: signature };
}

function refuse(field: string, problem: string | undefined): void {
  if (problem !== undefined) throw new InvalidJobError(`invalid commit: ${field}: ${problem}`);
}

/** `message` + blank line + `Agent-Job-Id: <jobId>`. */
export function commitMessage(message: string, jobId: string): string {
  return `${message.trimEnd()}\n\n${JOB_TRAILER}: ${jobId}\n`;
}

/** True when the last paragraph of `message` (git's trailer block) names `jobId`. */
export function hasJobTrailer(message: string, jobId: string): boolean {
  const paragraphs = message.trimEnd().split(/\n\s*\n/);
  const trailers = paragraphs[paragraphs.length - 1] ?? '';
  return trailers.split('\n').some((line) => line.trim() === `${JOB_TRAILER}: ${jobId}`);
}
