/**
 * What the test sandbox (tools/local/sandbox.ts) adds to a test job: the local runner's whole job,
 * from `start` to its verdict (checkout of the pinned commit, the run, cleaning up), at each level
 * of isolation, taking turns in one run so that the machine's load falls on all of them alike:
 *
 * - unconfined, no limits;
 * - namespaces, no limits: the confinement before the sandbox;
 * - namespaces with cgroup limits: what the limits add by themselves;
 * - the sandbox with cgroup limits, without and with its network (slirp4netns): the default here.
 *
 * For a small repository (a few files) and one of 2,000 files (8 MiB), whose checkout the sandbox
 * copies into its tmpfs. The command is `true`: the figures are the platform's cost, not a test
 * suite's. Needs bubblewrap, slirp4netns and cgroups (root); a level the machine lacks is reported
 * as missing.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CommandRun } from '../src/core/ports';
import type { Confinement, Isolation, ResourceControl } from '../tools/local/confinement';
import { probeIsolation } from '../tools/local/run-launcher';
import { runKey } from '../src/core/jobs/command-stage';
import { LocalTestRunner } from '../tools/local/test-runner';
import { runTestsMessage } from '../test/support/stage-messages';
import { fmt, median, quick, type Benchmark, type BenchRow } from './harness';

const NO_LIMITS: ResourceControl = { kind: 'rlimit', reason: 'the benchmark measures without limits' };

interface Level {
  readonly label: string;
  readonly isolation: Isolation;
}

function levels(machine: Isolation): { levels: Level[]; missing: string[] } {
  const { resources } = machine;
  const sandbox = (network: 'slirp4netns' | 'none'): Confinement => ({
    kind: 'sandbox',
    network,
    ...(machine.confinement.kind === 'sandbox' && machine.confinement.runAs && { runAs: machine.confinement.runAs }),
  });
  const namespaces: Confinement = { kind: 'namespaces', reason: 'the level before the sandbox' };
  const all: Level[] = [
    {
      label: 'unconfined, no limits',
      isolation: { confinement: { kind: 'none', reason: 'benchmark' }, resources: NO_LIMITS },
    },
    {
      label: 'namespaces, no limits (the confinement before the sandbox)',
      isolation: { confinement: namespaces, resources: NO_LIMITS },
    },
    { label: 'namespaces, cgroup limits', isolation: { confinement: namespaces, resources } },
    { label: 'sandbox, cgroup limits, no network', isolation: { confinement: sandbox('none'), resources } },
    {
      label: 'sandbox, cgroup limits, slirp4netns network (the default)',
      isolation: { confinement: sandbox('slirp4netns'), resources },
    },
  ];
  const missing: string[] = [];
  if (resources.kind !== 'cgroup') missing.push(`cgroups (${resources.reason})`);
  if (machine.confinement.kind !== 'sandbox')
    missing.push(`the sandbox (${'reason' in machine.confinement ? machine.confinement.reason : ''})`);
  else if (machine.confinement.network !== 'slirp4netns')
    missing.push(`its network (${machine.confinement.networkMissing ?? ''})`);
  return { levels: missing.length ? all.slice(0, 2) : all, missing };
}

/** A repository of `files` files of `bytes` each, committed; its path and commit. */
function repository(root: string, name: string, files: number, bytes: number): { url: string; sha: string } {
  const dir = join(root, name);
  mkdirSync(dir);
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', dir, '-c', 'user.name=bench', '-c', 'user.email=bench@example.invalid', ...args], {
      encoding: 'utf8',
    }).trim();
  git('init', '--quiet', '--initial-branch=main');
  for (let i = 0; i < files; i++) {
    const sub = join(dir, `d${i % 20}`);
    mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `f${i}.txt`), `${i}\n`.repeat(Math.max(1, Math.floor(bytes / 6))));
  }
  git('add', '.');
  git('commit', '--quiet', '-m', 'bench');
  return { url: dir, sha: git('rev-parse', 'HEAD') };
}

export const bench: Benchmark = {
  name: 'sandbox',
  async run() {
    const rounds = quick() ? 4 : 12;
    const root = mkdtempSync(join(tmpdir(), 'bench-sandbox-'));
    try {
      const machine = await probeIsolation(tmpdir());
      const { levels: measured, missing } = levels(machine);
      const repos = [
        { label: 'small repository (3 files)', ...repository(root, 'small', 3, 100) },
        { label: '2,000 files, 8 MiB', ...repository(root, 'medium', 2000, 4096) },
      ];
      const rows: BenchRow[] = [];
      const overheads: string[] = [];
      let job = 0;
      for (const repo of repos) {
        const runners = measured.map(
          (level) => new LocalTestRunner({ stateDir: mkdtempSync(join(root, 'state-')), ...level.isolation }),
        );
        const timings: number[][] = measured.map(() => []);
        const once = async (runner: LocalTestRunner) => {
          const command = 'true';
          const message = runTestsMessage({
            jobId: `bench-${++job}`,
            payload: { command },
            pin: { sha: repo.sha, repoUrl: repo.url, branch: 'main' },
          });
          const run: CommandRun = {
            job: message,
            run: 0,
            key: runKey(message, 0, new Date().toISOString()),
            command,
            timeoutSeconds: 60,
          };
          const started = performance.now();
          const status = await runner.whenDone((await runner.start(run)).buildId);
          if (status.state !== 'PASSED') throw new Error(`a benchmark run did not pass: ${JSON.stringify(status)}`);
          return performance.now() - started;
        };
        // One warm-up each (the first git and bwrap start), then rounds taking turns.
        for (const runner of runners) await once(runner);
        for (let round = 0; round < rounds; round++) {
          for (const [i, runner] of runners.entries()) timings[i]!.push(await once(runner));
        }
        await Promise.all(runners.map((r) => r.close()));
        for (const [i, level] of measured.entries())
          rows.push({ label: `${repo.label}: ${level.label}`, value: fmt.msSpread(timings[i]!) });
        if (measured.length === 5) {
          const before = median(timings[1]!);
          const after = median(timings[4]!);
          rows.push({
            label: `${repo.label}: the sandbox against the confinement before it`,
            value: `+${fmt.ms(after - before)} (${fmt.ratio(after / before)})`,
          });
          overheads.push(`+${fmt.ms(after - before)} (${repo.label})`);
        }
      }
      return {
        title: 'Test sandbox: what it adds to a test job',
        description: [
          'A run_tests job through the local runner, start to verdict (checkout, run of `true`, clean-up), at each level of',
          `isolation, taking turns (${rounds} rounds after a warm-up each; median, spread and sample size). Command:`,
          '`npm run bench -- sandbox`.',
          ...(missing.length ? ['', `Not measured here, missing: ${missing.join('; ')}.`] : []),
        ].join('\n'),
        rows,
        ...(overheads.length
          ? {
              summary: [
                {
                  measure: 'time the test sandbox adds to a test job, against the namespaces before it',
                  value: overheads.join(', '),
                  goal: 'small beside a test suite (under 0.5 s)',
                },
              ],
            }
          : {}),
      };
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  },
};
