import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { commandHelp, parseInvocation, type CommandSpec } from '../../tools/cli/command';
import { COMMANDS } from '../../tools/cli/commands';
import { jobFromArgs } from '../../tools/cli/commands/enqueue';
import { repositoryOnItsWay } from '../../tools/operator/enqueue';
import { dlqRows } from '../../tools/operator/dlq';
import { jobSummary } from '../../tools/operator/views';
import { redriveDeduplicationId } from '../../tools/operator/dlq-messages';
import type { CliContext, CliIo } from '../../tools/cli/context';
import { createContext } from '../../tools/cli/context';
import { UsageError } from '../../tools/cli/errors';
import { payloadFlags, payloadFromFlags } from '../../tools/cli/job-options';
import { runCli } from '../../tools/cli/main';
import { table } from '../../tools/cli/output';
import type { JobRecord } from '../../src/core/ports';
import { COMMAND_JOB_TYPES } from '../../contract/job-types';

/** A terminal in memory: what the CLI wrote, and stdin text. */
function memoryIo(options: { stdin?: string; cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = {
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    stdin: () => [Buffer.from(options.stdin ?? '')],
    env: options.env ?? {},
    cwd: options.cwd ?? tmpdir(),
    untilInterrupted: () => new Promise(() => undefined),
  };
  return { io, stdout: () => out.join(''), stderr: () => err.join('') };
}

const contextOf = (io: CliIo) =>
  createContext(io, {}, async () => {
    throw new Error('no nested command expected');
  });

describe('repositoryOnItsWay (enqueue refuses a staged job for a workspace without a repository)', () => {
  const open = (type: string, status: string) => ({ jobId: `${type}-${status}`, type, status }) as unknown as JobRecord;

  it('counts an ordered job still to come, not one cancelled before its turn nor a staged one', () => {
    expect(repositoryOnItsWay([open('apply_patch', 'QUEUED')])).toBe(true);
    expect(repositoryOnItsWay([open('apply_patch', 'IN_FLIGHT')])).toBe(true);
    expect(repositoryOnItsWay([open('apply_patch', 'CANCELLED')])).toBe(false);
    expect(repositoryOnItsWay([open('run_tests', 'QUEUED')])).toBe(false);
    expect(repositoryOnItsWay([])).toBe(false);
  });
});

describe('parseInvocation', () => {
  it('picks the longest command path and parses its options', () => {
    const inv = parseInvocation(COMMANDS, ['workspace', 'unblock', 'ws-1', '--replay', '--json']);
    expect(inv.kind).toBe('run');
    if (inv.kind !== 'run') return;
    expect(inv.command.path).toEqual(['workspace', 'unblock']);
    expect(inv.args.positionals).toEqual(['ws-1']);
    expect(inv.args.values).toMatchObject({ replay: true, json: true });
    expect(inv.json).toBe(true);
  });

  it('rejects an unknown command, an unknown flag and a missing argument with UsageError', () => {
    expect(() => parseInvocation(COMMANDS, ['frobnicate'])).toThrow(UsageError);
    expect(() => parseInvocation(COMMANDS, ['status', 'j1', '--nope'])).toThrow(/--nope/);
    expect(() => parseInvocation(COMMANDS, ['status'])).toThrow(/missing argument <jobId>/);
    expect(() => parseInvocation(COMMANDS, ['status', 'a', 'b'])).toThrow(/unexpected argument: b/);
  });

  it('accepts several ids for the variadic wait', () => {
    const inv = parseInvocation(COMMANDS, ['wait', 'a', 'b', 'c', '--timeout', '5']);
    expect(inv.kind === 'run' && inv.args.positionals).toEqual(['a', 'b', 'c']);
  });

  it('returns help for --help on any command, for no command and for a command group', () => {
    expect(parseInvocation(COMMANDS, ['dlq', 'redrive', '--help'])).toMatchObject({
      kind: 'help',
      command: { path: ['dlq', 'redrive'] },
    });
    expect(parseInvocation(COMMANDS, [])).toEqual({ kind: 'help', json: false });
    expect(parseInvocation(COMMANDS, ['dlq', '-h'])).toEqual({ kind: 'help', group: 'dlq', json: false });
  });
});

describe('help', () => {
  it.each(COMMANDS.map((c) => [c.path.join(' '), c] as const))(
    '%s: usage, its own options and the global ones',
    (_, command) => {
      const help = commandHelp(command as CommandSpec<CliContext>, 'agent-jobs');
      expect(help.startsWith(`Usage: agent-jobs ${command.path.join(' ')}`)).toBe(true);
      for (const name of Object.keys(command.options ?? {})) expect(help).toContain(`--${name}`);
      expect(help).toContain('--json');
    },
  );

  it('lists a flag for every scalar payload field of every job type', () => {
    const help = commandHelp(COMMANDS.find((c) => c.path[0] === 'enqueue') as CommandSpec<CliContext>, 'agent-jobs');
    for (const flag of [
      '--repo',
      '--branch',
      '--diff-file',
      '--base-sha',
      '--message',
      '--command',
      '--timeout-seconds',
      '--base',
      '--title',
    ]) {
      expect(help).toContain(flag);
    }
    expect(help).not.toContain('--diff-ref');
  });
});

describe('runCli', () => {
  it('prints help on stdout with exit 0', async () => {
    const t = memoryIo();
    expect(await runCli(['--help'], t.io, COMMANDS)).toBe(0);
    expect(t.stdout()).toContain('Commands:');
    expect(t.stderr()).toBe('');
  });

  it("reports a usage error on stderr in one line with exit 2, pointing at the command's help", async () => {
    const t = memoryIo();
    expect(await runCli(['workspace', 'unblock', 'ws-1'], t.io, COMMANDS)).toBe(2);
    expect(t.stdout()).toBe('');
    expect(t.stderr()).toBe(
      'agent-jobs: exactly one of --replay or --drop is required (agent-jobs workspace unblock --help shows the usage)\n',
    );
  });

  it('prints the version with --version, as JSON with --json', async () => {
    const version = (
      JSON.parse(await readFile(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }
    ).version;
    const text = memoryIo();
    expect(await runCli(['--version'], text.io, COMMANDS)).toBe(0);
    expect(text.stdout()).toBe(`agent-jobs ${version}\n`);
    const json = memoryIo();
    expect(await runCli(['--version', '--json'], json.io, COMMANDS)).toBe(0);
    expect(JSON.parse(json.stdout())).toEqual({ version });
  });

  it('with --json keeps stdout empty on failure and writes a JSON error on stderr', async () => {
    const cwd = await mkdtemp(path.join(tmpdir(), 'cli-'));
    // A state directory of its own: a platform running from the project must not answer here.
    const t = memoryIo({ cwd, env: { AGENT_JOBS_STATE_DIR: 'state' } });
    expect(await runCli(['status', 'job-1', '--json'], t.io, COMMANDS)).toBe(5);
    expect(t.stdout()).toBe('');
    expect(JSON.parse(t.stderr())).toEqual({
      error: { name: 'TargetError', message: expect.stringContaining('no local platform'), exitCode: 5 },
    });
    await rm(t.io.cwd, { recursive: true });
  });
});

describe('state directory', () => {
  it("defaults to the project's .agent-jobs whatever the working directory, so every command finds the platform npm start runs", () => {
    const fromElsewhere = contextOf(memoryIo({ cwd: tmpdir() }).io);
    expect(fromElsewhere.stateDir).toBe(path.resolve(__dirname, '..', '..', '.agent-jobs'));
    fromElsewhere.close();
  });

  it('takes --state-dir or AGENT_JOBS_STATE_DIR relative to the working directory', () => {
    const context = contextOf(memoryIo({ cwd: '/work/x', env: { AGENT_JOBS_STATE_DIR: 'state' } }).io);
    expect(context.stateDir).toBe('/work/x/state');
    context.close();
  });
});

describe('enqueue arguments', () => {
  const flags = payloadFlags();
  const usage = ['enqueue'];
  const noFile = async (): Promise<Uint8Array> => {
    throw new Error('no file expected');
  };

  it('derives flags from the catalog, renaming the fields people name differently', () => {
    const byFlag = Object.fromEntries(flags.map((f) => [f.flag, f]));
    expect(byFlag.repo).toMatchObject({ path: ['repo', 'url'], types: ['apply_patch'] });
    expect(byFlag['diff-file']).toMatchObject({ path: ['diff'], kind: 'file' });
    expect(byFlag['timeout-seconds']).toMatchObject({
      path: ['timeoutSeconds'],
      kind: 'number',
      types: [...COMMAND_JOB_TYPES],
    });
    expect(byFlag.base).toMatchObject({ path: ['baseBranch'], types: ['open_pr'] });
    expect(byFlag['diff-ref-bucket']).toBeUndefined();
  });

  it('builds nested payloads, parses numbers and reads files as bytes', async () => {
    const patch = await payloadFromFlags(
      'apply_patch',
      { repo: 'http://h/r.git', branch: 'main', 'diff-file': 'p.diff', message: 'm' },
      flags,
      {},
      async (f) => Buffer.from(`contents of ${f}`),
      usage,
    );
    expect(patch).toEqual({
      repo: { url: 'http://h/r.git', branch: 'main' },
      diff: Buffer.from('contents of p.diff'),
      message: 'm',
    });
    const tests = await payloadFromFlags(
      'run_tests',
      { 'timeout-seconds': '30', command: 'npm test' },
      flags,
      {},
      noFile,
      usage,
    );
    expect(tests).toEqual({ timeoutSeconds: 30, command: 'npm test' });
  });

  it('puts flags on top of --payload and refuses a flag of another job type', async () => {
    expect(
      await payloadFromFlags('open_pr', { title: 'T' }, flags, { baseBranch: 'main', title: 'old' }, noFile, usage),
    ).toEqual({ baseBranch: 'main', title: 'T' });
    await expect(payloadFromFlags('run_tests', { title: 'T' }, flags, {}, noFile, usage)).rejects.toThrow(
      '--title does not apply to run_tests (only open_pr)',
    );
    await expect(
      payloadFromFlags('run_tests', { 'timeout-seconds': 'soon' }, flags, {}, noFile, usage),
    ).rejects.toThrow(UsageError);
    // Number('') is 0: an empty value must not pass as a zero timeout.
    await expect(payloadFromFlags('run_tests', { 'timeout-seconds': ' ' }, flags, {}, noFile, usage)).rejects.toThrow(
      '--timeout-seconds must be a number, got " "',
    );
  });

  it('reads a whole job from stdin, with the default tenant and a generated job id', async () => {
    const job = { type: 'run_tests', workspaceId: 'ws-1', payload: { command: 'make check' } };
    const t = memoryIo({ stdin: JSON.stringify(job) });
    const request = await jobFromArgs(contextOf(t.io), {}, true);
    expect(request).toMatchObject({ ...job, tenantId: 'default', jobId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
  });

  it('requires --type and --workspace when not reading stdin', async () => {
    const t = memoryIo();
    await expect(jobFromArgs(contextOf(t.io), { workspace: 'w' }, false)).rejects.toThrow('--type is required');
    await expect(jobFromArgs(contextOf(t.io), { type: 'open_pr' }, false)).rejects.toThrow('--workspace is required');
    await expect(jobFromArgs(contextOf(t.io), { type: 'nope', workspace: 'w' }, false)).rejects.toThrow(
      /unknown --type nope/,
    );
  });

  it('reads --diff-file relative to the working directory, as bytes (a Latin-1 byte stays itself)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'cli-'));
    const bytes = Buffer.from([0x44, 0x49, 0x46, 0x46, 0xe9, 0x0a]);
    await writeFile(path.join(dir, 'a.diff'), bytes);
    const t = memoryIo({ cwd: dir });
    const request = await jobFromArgs(
      contextOf(t.io),
      { type: 'apply_patch', workspace: 'w', 'diff-file': 'a.diff', 'job-id': 'j1' },
      false,
    );
    expect(request).toMatchObject({ jobId: 'j1', payload: { diff: bytes } });
    await rm(dir, { recursive: true });
  });
});

describe('table', () => {
  it('aligns columns and prints empty cells as "-"', () => {
    expect(
      table(
        ['A', 'BB'],
        [
          ['x', undefined],
          ['long', 2],
        ],
      ),
    ).toBe(['A     BB', 'x     -', 'long  2'].join('\n'));
  });
});

describe('jobSummary', () => {
  const base = {
    jobId: 'j',
    workspaceId: 'w',
    tenantId: 't',
    digest: 'd',
    attempt: 1,
    createdAt: '',
    updatedAt: '',
    ttl: 0,
  } as const;
  const sha = 'a'.repeat(40);

  it('says what each built-in job type produced, in one line', () => {
    expect(
      jobSummary({
        ...base,
        type: 'apply_patch',
        status: 'SUCCEEDED',
        result: { commitSha: sha, alreadyApplied: true },
      }),
    ).toBe('commit aaaaaaaaaaaa (already on the branch)');
    expect(
      jobSummary({
        ...base,
        type: 'run_tests',
        status: 'SUCCEEDED',
        result: { verdict: 'failed', exitCode: 1, sha, logTail: 'x'.repeat(5000) },
      }),
    ).toBe('tests failed (exit 1) at aaaaaaaaaaaa');
    expect(
      jobSummary({ ...base, type: 'open_pr', status: 'SUCCEEDED', result: { number: 3, url: 'http://pr/3' } }),
    ).toBe('pull request #3 http://pr/3');
  });

  it('prefers the failure, then the fence, and shortens unknown results', () => {
    expect(
      jobSummary({
        ...base,
        type: 'apply_patch',
        status: 'FAILED',
        error: { reason: 'CONFLICT', message: 'other digest' },
      }),
    ).toBe('CONFLICT: other digest');
    expect(jobSummary({ ...base, type: 'apply_patch', status: 'SKIPPED', blockedBy: 'j0' })).toBe('blocked by j0');
    expect(
      jobSummary({ ...base, type: 'run_tests', status: 'SUCCEEDED', result: { custom: 'y'.repeat(300) } }),
    ).toHaveLength(100);
  });
});

describe('DLQ helpers', () => {
  it('gives a redriven message the dedup id of decisions §2, distinct from the original send', () => {
    const expected = createHash('sha256').update('job-1:apply_patch:redrive:msg-9').digest('hex');
    expect(redriveDeduplicationId('job-1', 'apply_patch', 'msg-9')).toBe(expected);
    expect(redriveDeduplicationId('job-1', 'apply_patch', 'msg-10')).not.toBe(expected);
  });

  it('lists what the ledger knows on each DLQ: the stage DLQ for a pinned job, a refused request as CONFLICT, the expired ones marked', () => {
    const now = Date.parse('2026-03-01T00:00:00Z');
    const job = {
      jobId: 'j',
      workspaceId: 'w',
      tenantId: 't',
      digest: 'd',
      attempt: 1,
      createdAt: '',
      ttl: 0,
    } as const;
    const pin = { sha: 'a'.repeat(40), repoUrl: 'http://h/r.git', branch: 'main' };
    const rows = dlqRows(
      [
        {
          kind: 'job',
          record: {
            ...job,
            type: 'run_tests',
            status: 'FAILED',
            pin,
            error: { reason: 'TEST_RUN_ERROR', message: 'FAULT' },
            updatedAt: '2026-02-28T00:00:00Z',
          },
        },
        {
          kind: 'job',
          record: {
            ...job,
            type: 'apply_patch',
            status: 'SKIPPED',
            blockedBy: 'p0',
            updatedAt: '2026-02-01T00:00:00Z',
          },
        },
        {
          kind: 'conflict',
          attempt: {
            jobId: 'j',
            workspaceId: 'w',
            tenantId: 't',
            type: 'apply_patch',
            at: '2026-02-27T00:00:00Z',
            seenBy: 'sequencer',
          },
        },
      ],
      now,
    );
    expect(rows.map((r) => [r.queue, r.status, r.reason, r.expired])).toEqual([
      ['run-tests', 'FAILED', 'TEST_RUN_ERROR', false],
      ['agent-jobs', 'SKIPPED', undefined, true],
      ['agent-jobs', 'CONFLICT', 'CONFLICT', false],
    ]);
  });
});
