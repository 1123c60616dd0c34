/**
 * What git accepts in what the platform writes: branch names (`git check-ref-format --branch`,
 * plus the names that would mean something else) and the fields of a commit (`git fsck --strict`).
 * The envelope validates them at the edge (zod schemas below) and the patch engine checks them
 * again before writing objects, with the same functions. Pure: no I/O.
 *
 * Each function returns why a value is refused, or undefined when it is acceptable.
 */
import * as z from 'zod/mini';
import './zod-english';

export const MAX_BRANCH_LENGTH = 200;
export const MAX_IDENTITY_NAME_LENGTH = 200;
export const MAX_EMAIL_LENGTH = 254;
export const MAX_COMMIT_MESSAGE_LENGTH = 10_000;

/**
 * Control characters: C0 and C1, DEL. Terminals act on some of them (ESC, CSI), so a name or a
 * message carrying one can rewrite what `git log` shows.
 */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
/** In a message: the controls except tab and line breaks. */
const MESSAGE_CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;

function codePoint(char: string): string {
  return `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * A lone surrogate cannot be written as UTF-8: it would reach the object as U+FFFD. (With the `u`
 * flag a surrogate range matches only unpaired ones; String#isWellFormed is not in lib es2022.)
 */
function notWellFormed(text: string): boolean {
  return /[\ud800-\udfff]/u.test(text);
}

/**
 * A branch of the workspace, as the platform fetches and pushes it (`refs/heads/<name>`). Beyond
 * git's own rules: `HEAD` names the remote's default branch, a name starting with `refs/` would
 * land under `refs/heads/refs/...`, and one starting with `-` reads as an option.
 */
export function branchNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'must not be empty';
  if (name.length > MAX_BRANCH_LENGTH) return `must be at most ${MAX_BRANCH_LENGTH} characters`;
  if (!/^[A-Za-z0-9._/-]+$/.test(name)) return 'may only contain A-Z a-z 0-9 . _ - /';
  if (name === 'HEAD') return "must name a branch, not HEAD (the remote's default branch)";
  if (name.startsWith('refs/'))
    return `must be a branch name, not a ref: use ${JSON.stringify(name.replace(/^refs\/heads\//, ''))}`;
  if (name.startsWith('-')) return 'must not start with "-"';
  if (name.startsWith('/') || name.endsWith('/') || name.includes('//'))
    return 'must not start or end with "/" or contain "//"';
  if (name.includes('..')) return 'must not contain ".."';
  if (name.endsWith('.')) return 'must not end with "."';
  for (const component of name.split('/')) {
    if (component.startsWith('.')) return `must not have a component starting with "." (${JSON.stringify(component)})`;
    if (component.endsWith('.lock'))
      return `must not have a component ending with ".lock" (${JSON.stringify(component)})`;
  }
  return undefined;
}

/** An author name, written as `<name> <<email>> <time> <zone>` in the commit header. */
export function identityNameProblem(name: string): string | undefined {
  if (name.trim().length === 0) return 'must not be blank';
  if (name.length > MAX_IDENTITY_NAME_LENGTH) return `must be at most ${MAX_IDENTITY_NAME_LENGTH} characters`;
  if (notWellFormed(name)) return 'must be well-formed Unicode (it has a lone surrogate)';
  const control = CONTROL.exec(name)?.[0];
  if (control !== undefined)
    return `must not contain control characters (${codePoint(control)}): a line break would inject a header`;
  if (/[<>]/.test(name)) return 'must not contain "<" or ">": they delimit the e-mail address in the commit header';
  return undefined;
}

/** An author e-mail address, written between `<` and `>` in the commit header. */
export function emailProblem(email: string): string | undefined {
  if (email.length === 0) return 'must not be empty';
  if (email.length > MAX_EMAIL_LENGTH) return `must be at most ${MAX_EMAIL_LENGTH} characters`;
  if (notWellFormed(email)) return 'must be well-formed Unicode (it has a lone surrogate)';
  const control = CONTROL.exec(email)?.[0];
  if (control !== undefined) return `must not contain control characters (${codePoint(control)})`;
  if (/[<>\s]/.test(email)) return 'must not contain "<", ">" or white space';
  return undefined;
}

/** The message the job gives; the platform appends its `Agent-Job-Id` trailer. */
export function commitMessageProblem(message: string): string | undefined {
  if (message.trim().length === 0) return 'must not be blank';
  if (message.length > MAX_COMMIT_MESSAGE_LENGTH) return `must be at most ${MAX_COMMIT_MESSAGE_LENGTH} characters`;
  if (notWellFormed(message)) return 'must be well-formed Unicode (it has a lone surrogate)';
  if (message.includes('\0'))
    return 'must not contain NUL: git stops reading the message there, hiding the Agent-Job-Id trailer';
  const control = MESSAGE_CONTROL.exec(message)?.[0];
  if (control !== undefined)
    return `must not contain control characters other than tab and line breaks (${codePoint(control)})`;
  return undefined;
}

/** Author and committer time: git dates are seconds since the Unix epoch, never before it. */
export function commitTimeProblem(isoTime: string): string | undefined {
  const time = Date.parse(isoTime);
  if (Number.isNaN(time)) return 'must be an ISO-8601 time';
  if (time < 0) return 'must be 1970-01-01 or later: git dates start at the Unix epoch';
  return undefined;
}

/** A zod check by one of the functions above, with the function's message. */
function problemCheck(problem: (value: string) => string | undefined) {
  return z.superRefine((value: string, ctx) => {
    const found = problem(value);
    if (found !== undefined) ctx.addIssue({ code: 'custom', message: found });
  });
}

/** A string checked by `problem`; `rule` says the check in words for the wire JSON Schema, which cannot express it. */
const checkedString = (problem: (value: string) => string | undefined, rule: string) =>
  z.string().check(problemCheck(problem), z.describe(rule));

export const branchNameSchema = checkedString(
  branchNameProblem,
  `A branch name (refs/heads/<name>): 1-${MAX_BRANCH_LENGTH} of A-Z a-z 0-9 . _ - /, not HEAD, not starting with refs/ or -, no "..", "//", leading or trailing "/", trailing ".", component starting with "." or ending with ".lock".`,
);
export const commitMessageSchema = checkedString(
  commitMessageProblem,
  `The commit message: not blank, at most ${MAX_COMMIT_MESSAGE_LENGTH} characters, no control characters other than tab and line breaks; the platform appends an Agent-Job-Id trailer.`,
);
export const authorSchema = z.strictObject({
  name: checkedString(
    identityNameProblem,
    `Not blank, at most ${MAX_IDENTITY_NAME_LENGTH} characters, no control characters, no < or >.`,
  ),
  email: z
    .email()
    .check(problemCheck(emailProblem), z.describe(`At most ${MAX_EMAIL_LENGTH} characters, no < > or white space.`)),
});
