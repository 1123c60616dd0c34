/**
 * What a git remote URL may be: the rules the envelope (repo.url) and the stage pin (pin.repoUrl)
 * share. Pure: no I/O, no DNS.
 *
 * Every check parses the URL with the WHATWG URL parser (the one Node's HTTP client dials with)
 * and works on the parsed parts, never on the text: `HTTP://user:token@host` has a user name
 * whatever the spelling, and `http://2130706433/` is 127.0.0.1. A URL that passes is carried in its
 * normalised form (`URL.href`), so what was checked is exactly what is stored and dialled.
 */
import * as z from 'zod/mini';
import './zod-english';

export const MAX_REPO_URL_LENGTH = 2048;

/** Why a repository URL is refused, or undefined when it is acceptable. Never echoes credentials. */
export function repoUrlProblem(text: string): string | undefined {
  if (text.length > MAX_REPO_URL_LENGTH) return `must be at most ${MAX_REPO_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an http(s) URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return `must be an http(s) URL, not ${url.protocol}`;
  if (url.username !== '' || url.password !== '') {
    return 'must not carry credentials (user:token@): the git credentials secret provides them, and a URL is stored in the queue, the DLQ and the ledger';
  }
  if (url.search !== '' || url.hash !== '') return 'must not have a query or a fragment';
  return undefined;
}

/** The form a repository URL is stored and compared in. Only call it on a URL repoUrlProblem accepts. */
export function normalizeRepoUrl(text: string): string {
  return new URL(text).href;
}

/** A repository URL on the wire (apply_patch's repo.url, a stage message's pin.repoUrl), normalised. */
export const repoUrlSchema = z.pipe(
  z.string({ error: 'must be an http(s) URL' }).check(
    z.superRefine((text, ctx) => {
      const problem = repoUrlProblem(text);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  ),
  z.transform(normalizeRepoUrl),
);
