/**
 * Who may use the console. It listens on 127.0.0.1 only, but every local user and every web page
 * the operator's browser opens can reach a loopback port, so:
 * - the Host must be the console's own (a DNS-rebinding page names its own host);
 * - a request a browser marks as coming from another origin (Origin, Sec-Fetch-Site) is refused;
 * - every request carries the token printed at start: the printed URL's `?token=` is exchanged
 *   for a cookie (HttpOnly, SameSite=Strict), so other local users read nothing;
 * - the console's pages live under a random path, its `root`, and the cookie is scoped to it:
 *   browsers scope cookies by host, not port, so a cookie for all of 127.0.0.1 would reach any
 *   listener on another port that a page links to (decisions §35);
 * - a request that changes something (POST) also carries the token in its body or in the
 *   `X-Console-Token` header, which a page of another origin cannot know (the cookie alone would
 *   be sent by a cross-site form).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

export const TOKEN_HEADER = 'x-console-token';
export const TOKEN_FIELD = 'token';

export interface ConsoleAuth {
  readonly token: string;
  readonly port: number;
  /** The path every page of this console is under, `/c/<random>/`: only its token's holder learns it. */
  readonly root: string;
}

export function newToken(): string {
  return randomBytes(24).toString('base64url');
}

export function newRoot(): string {
  return `/c/${randomBytes(16).toString('base64url')}/`;
}

/** The console's own path of a request (`/jobs/x` of `<root>jobs/x`), or undefined outside its root. */
export function pathInRoot(auth: ConsoleAuth, pathname: string): string | undefined {
  return pathname.startsWith(auth.root) ? `/${pathname.slice(auth.root.length)}` : undefined;
}

export function cookieName(port: number): string {
  return `agent_jobs_console_${port}`;
}

/** The origins the console answers as: the address it listens on, by IP and by name. */
export function ownOrigins(port: number): string[] {
  return [`http://127.0.0.1:${port}`, `http://localhost:${port}`];
}

export type Refusal = { readonly status: 400 | 401 | 403; readonly reason: string };

export function sameToken(given: string | undefined, token: string): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

function cookie(headers: IncomingHttpHeaders, name: string): string | undefined {
  for (const part of (headers.cookie ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
}

/** Whether the request comes from where the console may be used from: its own host, not another origin. */
export function originRefusal(auth: ConsoleAuth, headers: IncomingHttpHeaders): Refusal | undefined {
  const origins = ownOrigins(auth.port);
  if (!origins.some((origin) => origin === `http://${headers.host ?? ''}`))
    return { status: 400, reason: `the console answers as ${origins.join(' or ')} only` };
  const origin = headers.origin;
  if (origin !== undefined && !origins.includes(origin))
    return {
      status: 403,
      reason: `a request from ${origin} is refused: the console takes requests from its own pages only`,
    };
  if (headers['sec-fetch-site'] === 'cross-site')
    return {
      status: 403,
      reason: 'a cross-site request is refused: the console takes requests from its own pages only',
    };
  return undefined;
}

/** Whether the request carries the session cookie holding the token. */
export function hasSession(auth: ConsoleAuth, headers: IncomingHttpHeaders): boolean {
  return sameToken(cookie(headers, cookieName(auth.port)), auth.token);
}

/** The Set-Cookie header that stores the token in the browser for this console's root only. */
export function sessionCookie(auth: ConsoleAuth): string {
  return `${cookieName(auth.port)}=${auth.token}; HttpOnly; SameSite=Strict; Path=${auth.root}`;
}

/** A change needs the token itself (header or form field), beside the session: a form of another origin cannot know it. */
export function changeRefusal(
  auth: ConsoleAuth,
  headers: IncomingHttpHeaders,
  form: URLSearchParams,
): Refusal | undefined {
  const header = headers[TOKEN_HEADER];
  const given = typeof header === 'string' ? header : (form.get(TOKEN_FIELD) ?? undefined);
  if (!sameToken(given, auth.token))
    return {
      status: 403,
      reason: 'a change needs the console token (the one printed at start): the request carried none, or another',
    };
  return undefined;
}
