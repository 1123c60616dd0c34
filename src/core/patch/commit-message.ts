/**
 * The commit trailer that makes apply_patch idempotent in the repository itself: before applying,
 * the adapter looks for a commit carrying the job's trailer between the branch head and the base.
 */
const JOB_TRAILER = 'Agent-Job-Id';

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
