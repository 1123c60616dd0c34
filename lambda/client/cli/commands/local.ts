/** Commands of the local platform: `local up`, `demo`, `repo import`. */
import type { CommandSpec } from '../command';
import type { CliContext } from '../context';
import { NotAvailableError } from '../errors';

const notYet = (what: string) => async (): Promise<never> => {
  throw new NotAvailableError(`not available yet: ${what}`);
};

export const localUp: CommandSpec<CliContext> = {
  path: ['local', 'up'],
  summary: 'start the local platform (emulators, git server, workers) until Ctrl-C',
  run: notYet('the local platform (lambda/local/platform.ts) has not landed'),
};

export const demo: CommandSpec<CliContext> = {
  path: ['demo'],
  summary: 'run the scripted end-to-end demo on a generated repository',
  run: notYet('the demo needs the local platform (lambda/local/platform.ts)'),
};

export const repoImport: CommandSpec<CliContext> = {
  path: ['repo', 'import'],
  summary: 'make a local git repository a remote on the local git server; prints its URL',
  run: notYet('repo import needs the local platform (lambda/local/platform.ts)'),
};
