/**
 * Commands of the local platform: `local up`, `demo`, `repo import`. The platform module (and the
 * handlers, emulators and git code it pulls in) is loaded only by the commands that need it, so
 * every other command starts fast.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { readLocalPlatform } from '../../operator/targets';
import { numberOption, requireString, type CommandSpec, type OptionValues } from '../command';
import type { CliContext } from '../context';
import { errorMessage } from '../../../src/core/errors';
import { REPOSITORIES_DIR } from '../../local/state-dir';
import { UsageError } from '../errors';
import { NotAvailableError, OutcomeError, TargetError } from '../../operator/errors';

// require(), not import(): the bin runs through tsx's CommonJS hook, which does not serve import().
const loadPlatform = (): typeof import('../../local/platform') => require('../../local/platform');
const loadDemo = (): typeof import('../../local/demo') => require('../../local/demo');
const loadGitServer = (): typeof import('../../local/git-server') => require('../../local/git-server');
const loadConsole = (): typeof import('../../console/server') => require('../../console/server');

/** The terminal as the Writable the platform's live view writes to. */
function terminal(write: (text: string) => void): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      write(chunk.toString());
      done();
    },
  });
}

function ports(values: OptionValues, commandPath: readonly string[]) {
  return {
    sqs: numberOption(values, 'port-sqs', commandPath),
    dynamodb: numberOption(values, 'port-dynamodb', commandPath),
    git: numberOption(values, 'port-git', commandPath),
  };
}

/** Runs the demo's CLI steps in process, against the platform at `stateDir`. */
async function demoAgainst(ctx: CliContext, stateDir: string) {
  const { runDemo } = loadDemo();
  return runDemo({
    stateDir,
    run: (argv) => ctx.invoke([...argv, '--state-dir', stateDir]),
    print: (line) => (ctx.json ? ctx.note(line) : ctx.io.stdout(`${line}\n`)),
  });
}

/**
 * `npm start --reset` gives --reset to npm, not to this command: npm keeps it as
 * `npm_config_reset`. Under `npm start`, such a flag of ours is taken as meant, and said so.
 */
function flagNpmKept(ctx: CliContext, flag: 'reset' | 'persist' | 'demo'): boolean {
  const { env } = ctx.io;
  if (env.npm_lifecycle_event !== 'start' || env[`npm_config_${flag}`] !== 'true') return false;
  ctx.note(
    `npm read --${flag} as its own option; taking it as local up --${flag} (npm start -- --${flag} passes it directly)`,
  );
  return true;
}

export const localUp: CommandSpec<CliContext> = {
  path: ['local', 'up'],
  summary: 'start the local platform (emulators, git server, workers) and show its live view until Ctrl-C',
  options: {
    reset: { type: 'boolean', description: 'delete the state directory first' },
    persist: {
      type: 'boolean',
      description:
        'keep the ledger, and so what waits on the DLQs, across restarts (other queued messages are in memory)',
    },
    'restore-ledger': {
      type: 'boolean',
      description:
        'with --persist: replace a lost or damaged ledger by the export of its last clean stop (jobs recorded after it are lost)',
    },
    'port-sqs': {
      type: 'string',
      valueName: 'n',
      description: 'SQS + S3 port (default: the last one used from this state directory, else a free port)',
    },
    'port-dynamodb': {
      type: 'string',
      valueName: 'n',
      description: 'DynamoDB port (default: the last one used from this state directory, else a free port)',
    },
    'port-git': {
      type: 'string',
      valueName: 'n',
      description: 'git server port (default: the last one used from this state directory, else a free port)',
    },
    'port-console': {
      type: 'string',
      valueName: 'n',
      description: 'web console port (default: a free port); its URL is printed with the ready line',
    },
    demo: { type: 'boolean', description: 'run the scripted demo once the platform is up' },
  },
  notes: [
    "With --json: one JSON line (the platform description, with the console's URLs) when ready, and nothing else on stdout.",
  ],
  async run(ctx, { values }) {
    const {
      startPlatform,
      PlatformAlreadyRunningError,
      PortInUseError,
      InvalidPortsFileError,
      StateDirUnusableError,
      LedgerStateError,
    } = loadPlatform();
    const restoreLedger = values['restore-ledger'] === true;
    if (restoreLedger && values.reset === true)
      throw new UsageError(
        '--restore-ledger and --reset exclude each other: --reset deletes the export too',
        this.path,
      );
    // Listen before the ready line prints: a Ctrl-C right after it must stop cleanly, not kill.
    const interrupted = ctx.io.untilInterrupted();
    // The console first, so its URL prints with the ready line; it finds the platform (platform.json) at its first request.
    const web = await loadConsole().startConsole({
      where: { stateDir: ctx.stateDir },
      port: numberOption(values, 'port-console', this.path) ?? 0,
    });
    let platform;
    try {
      platform = await startPlatform({
        stateDir: ctx.stateDir,
        ports: ports(values, this.path),
        reset: values.reset === true || flagNpmKept(ctx, 'reset'),
        persist: values.persist === true || restoreLedger || flagNpmKept(ctx, 'persist'),
        restoreLedger,
        output: ctx.json ? null : terminal(ctx.io.stdout),
        readyNotes: [`  console  ${web.openUrl}`],
      });
    } catch (error) {
      await web.close();
      // Refusals of the start are one line (exit 5); anything else is unexpected and keeps its class.
      const refusals = [
        PlatformAlreadyRunningError,
        PortInUseError,
        InvalidPortsFileError,
        StateDirUnusableError,
        LedgerStateError,
      ];
      throw error instanceof Error && refusals.some((refusal) => error instanceof refusal)
        ? new TargetError(error.message, { cause: error })
        : error;
    }
    try {
      if (ctx.json)
        ctx.io.stdout(`${JSON.stringify({ ...platform.info, console: { url: web.url, openUrl: web.openUrl } })}\n`);
      if (values.demo === true || flagNpmKept(ctx, 'demo')) {
        const outcome = await demoAgainst(ctx, ctx.stateDir);
        // The live view goes on below: say that the scenario is over and what to do next.
        const line = `demo done: ${doneCounts(outcome.jobs)}; the platform keeps running: agent-jobs workspaces, agent-jobs console; Ctrl-C stops it`;
        if (ctx.json) ctx.note(line);
        else ctx.io.stdout(`${line}\n`);
      }
      await interrupted;
    } finally {
      await web.close();
      await platform.stop();
    }
    ctx.note('local platform stopped');
    return { data: undefined, text: '' };
  },
};

export const demo: CommandSpec<CliContext> = {
  path: ['demo'],
  summary: 'run the scripted end-to-end demo on a generated repository (starts a platform if none runs)',
  async run(ctx) {
    const running = await readLocalPlatform(ctx.stateDir).then(
      () => true,
      (error: unknown) => {
        if (error instanceof TargetError) return false;
        throw error;
      },
    );
    if (running) return summary(await demoAgainst(ctx, ctx.stateDir));
    const stateDir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-demo-platform-'));
    try {
      const platform = await loadPlatform().startPlatform({ stateDir, persist: false, output: null });
      ctx.note(`started a local platform for the demo in ${stateDir}`);
      try {
        return summary(await demoAgainst(ctx, stateDir));
      } finally {
        await platform.stop();
      }
    } finally {
      await rm(stateDir, { recursive: true, force: true });
    }
  },
};

/** `8 jobs (SUCCEEDED 4, tests failed 1, ...)`: the demo's outcomes by status label, in first-seen order. */
function doneCounts(jobs: Readonly<Record<string, string>>): string {
  const counts = new Map<string, number>();
  for (const label of Object.values(jobs)) counts.set(label, (counts.get(label) ?? 0) + 1);
  return `${Object.keys(jobs).length} jobs (${[...counts].map(([label, n]) => `${label} ${n}`).join(', ')})`;
}

function summary(result: Awaited<ReturnType<typeof demoAgainst>>) {
  const lines = [
    '',
    '## Job outcomes',
    ...Object.entries(result.jobs).map(([jobId, status]) => `${jobId.padEnd(12)} ${status}`),
  ];
  return { data: result, text: lines.join('\n') };
}

/** What a second import of a name did: the branches it added, and those it left as the server has them. */
function importedAgainNote(
  name: string,
  source: string,
  branches: { readonly added: readonly string[]; readonly kept: readonly string[] },
): string {
  const list = (names: readonly string[]) => `branch${names.length === 1 ? '' : 'es'} ${names.join(', ')}`;
  const added =
    branches.added.length > 0 ? `added ${list(branches.added)} from ${source}` : `no new branch in ${source}`;
  const kept =
    branches.kept.length > 0
      ? `; kept ${list(branches.kept)} as ${branches.kept.length === 1 ? 'it is' : 'they are'} here (the platform's commits stay)`
      : '';
  return `repository ${name} was imported before: ${added}${kept}`;
}

export const repoImport: CommandSpec<CliContext> = {
  path: ['repo', 'import'],
  summary: 'make a local git repository a remote on the local git server; prints its URL',
  positionals: [{ name: 'dir', description: 'a git repository (every branch is imported)' }],
  options: { name: { type: 'string', valueName: 'name', description: 'repository name on the server (required)' } },
  async run(ctx, { positionals, values }) {
    const name = requireString(values, 'name', this.path);
    const target = await ctx.target();
    if (!target.local)
      throw new NotAvailableError(`repo import works on the local platform only; ${target.label} uses your git host`);
    const { startGitServer, InvalidRepositoryNameError } = loadGitServer();
    const source = path.resolve(ctx.io.cwd, positionals[0] ?? '');
    // The platform's git server serves every repository under its root; a second, short-lived
    // server on the same root does the import with the same name rules (platform.json has no API).
    const server = await startGitServer({ root: path.join(target.local.stateDir, REPOSITORIES_DIR) });
    let created = true;
    let branches: { readonly added: string[]; readonly kept: string[] } | undefined;
    try {
      // Importing a name twice answers the same URL (a README walkthrough run again, a restart):
      // the branches there are kept as they are, with the platform's commits on them; new ones come in.
      if (existsSync(server.gitDir(name))) {
        created = false;
        branches = await server.importNewBranches(source, name);
      } else await server.importRepository(source, name);
    } catch (error) {
      if (error instanceof InvalidRepositoryNameError) throw new UsageError(error.message, this.path);
      // execFile's error carries git's stderr: "already exists", "not a git repository", ...
      const detail = (error as { stderr?: string }).stderr?.trim() || errorMessage(error);
      throw new OutcomeError(`cannot import ${source} as ${name}: ${detail}`);
    } finally {
      await server.close();
    }
    const url = `${target.local.gitUrl}/${name}.git`;
    if (branches) ctx.note(importedAgainNote(name, source, branches));
    return { data: { name, url, created, ...(branches && { addedBranches: branches.added }) }, text: url };
  },
};
