/**
 * Hostile handling of the local platform's state directory, as a careless user (or a script) treats
 * it: a second start with --reset while a platform runs and its platform.json is gone, a ledger
 * whose files lost their data or were damaged, a state directory that cannot be written. Each start
 * is refused with one line naming what is wrong and the way out, before anything is deleted or
 * started; the running platform and the repositories are untouched.
 *
 * The platform under attack runs in this process (tools/local/platform.ts); the second start runs
 * through the real CLI in a process of its own, as `npm start -- --reset` does.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { localLedger } from '../../src/compose/local';
import { jobDigest } from '../../src/core/envelope';
import { EXIT } from '../../tools/cli/errors';
import { PlatformAlreadyRunningError, startPlatform, type LocalPlatform } from '../../tools/local/platform';
import { DYNAMODB_EMULATORS, dynamoDbEmulatorOf } from '../../tools/local/emulators';
import { MANIFEST_FILE } from '../../tools/local/persisted-ledger';
import { PLATFORM_FILE, REPOSITORIES_DIR } from '../../tools/local/state-dir';
import { newJob } from '../support/ledger-contract';
import { ledgerDamages, loseLatestWrites } from '../support/ledger-damage';
import { localUp, type LocalUpRun } from '../support/local-up';

jest.setTimeout(180_000);

/** One line on stderr, nothing on stdout (no ready line), exit 5 (the platform cannot start). */
function expectRefused(run: LocalUpRun, says: RegExp): void {
  expect({ code: run.code, stdout: run.stdout }).toEqual({ code: EXIT.unavailable, stdout: '' });
  expect(run.stderr.trim().split('\n')).toEqual([expect.stringMatching(says)]);
}

describe('the local state directory under abuse', () => {
  let root: string;
  let stateDir: string;
  const started: LocalPlatform[] = [];
  const start = async (options: Parameters<typeof startPlatform>[0] = {}) => {
    const platform = await startPlatform({ stateDir, output: null, persist: true, ...options });
    started.push(platform);
    return platform;
  };

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'agent-jobs-state-abuse-'));
    stateDir = path.join(root, 'state');
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((p) => p.stop()));
    await chmod(root, 0o755).catch(() => undefined);
    await rm(root, { recursive: true, force: true });
  });

  /** A repository in the state directory and a job in the ledger: what a second start must not touch. */
  async function withState(platform: LocalPlatform): Promise<{ repo: string; jobId: string }> {
    const repo = path.join(stateDir, REPOSITORIES_DIR, 'kept.git');
    await mkdir(repo, { recursive: true });
    await writeFile(path.join(repo, 'HEAD'), 'ref: refs/heads/main\n');
    const job = newJob();
    await localLedger(platform.emulators).recordQueued({ job, digest: jobDigest(job), now: Date.now() });
    return { repo, jobId: job.jobId };
  }

  describe('two platforms on one directory', () => {
    it('refuses `local up --reset` while a platform runs and its platform.json is gone, naming the platform; nothing is deleted', async () => {
      const running = await start();
      const { repo, jobId } = await withState(running);
      await rm(path.join(stateDir, PLATFORM_FILE));

      const second = await localUp(['--reset', '--persist', '--state-dir', stateDir]);

      expectRefused(
        second,
        new RegExp(
          `a local platform is already running from .*state \\(pid ${process.pid}, .*git ${running.info.gitUrl}.*\\): stop it first`,
        ),
      );
      expect(existsSync(repo)).toBe(true);
      // The running platform is whole: its ledger still answers and still holds the job.
      expect(await localLedger(running.emulators).getJob(jobId)).toMatchObject({ jobId, status: 'QUEUED' });
    });

    it('refuses a second start in the same process too, whatever the directory holds', async () => {
      await start();
      await rm(path.join(stateDir, PLATFORM_FILE));
      await expect(start({ reset: true })).rejects.toThrow(PlatformAlreadyRunningError);
    });

    it('frees the directory when the platform stops, so the next start runs', async () => {
      await (await start()).stop();
      await expect(start()).resolves.toBeDefined();
    });
  });

  describe('a persisted ledger that lost its data or was damaged', () => {
    /** A platform that recorded a job and stopped cleanly: the state directory knows its ledger. */
    async function stoppedWithAJob(): Promise<string> {
      const first = await start();
      const { jobId } = await withState(first);
      await first.stop();
      return jobId;
    }
    const ledgerDir = () => path.join(stateDir, 'dynamodb');

    it('refuses a ledger that lost its latest writes (its log emptied), naming it and the way out, and --restore-ledger brings back the last clean stop', async () => {
      const jobId = await stoppedWithAJob();
      await loseLatestWrites(dynamoDbEmulatorOf())(ledgerDir());

      const refused = await localUp(['--persist', '--state-dir', stateDir]);

      expectRefused(
        refused,
        new RegExp(`the persisted ledger in ${ledgerDir()} lost data: .*--restore-ledger .*--reset`),
      );
      expect(existsSync(path.join(stateDir, PLATFORM_FILE))).toBe(false);
      const restored = await start({ restoreLedger: true });
      expect(await localLedger(restored.emulators).getJob(jobId)).toMatchObject({ jobId, status: 'QUEUED' });
    });

    it('refuses a ledger another DynamoDB emulator kept, which this one cannot read, naming both', async () => {
      await stoppedWithAJob();
      const other = DYNAMODB_EMULATORS.find((emulator) => emulator !== dynamoDbEmulatorOf());
      const manifest = path.join(stateDir, MANIFEST_FILE);
      await writeFile(
        manifest,
        JSON.stringify({ ledger: { ...JSON.parse(await readFile(manifest, 'utf8')).ledger, emulator: other } }),
      );

      const refused = await localUp(['--persist', '--state-dir', stateDir]);

      expectRefused(
        refused,
        new RegExp(
          `the persisted ledger in ${ledgerDir()} was kept by ${other}, which this start \\(${dynamoDbEmulatorOf()}\\) cannot read`,
        ),
      );
    });

    it.each(Object.entries(ledgerDamages(dynamoDbEmulatorOf())))(
      'refuses a ledger with %s in one line naming the ledger and the fix, no stack trace',
      async (_damage, damage) => {
        await stoppedWithAJob();
        await damage(ledgerDir());

        const refused = await localUp(['--persist', '--state-dir', stateDir]);

        expectRefused(refused, new RegExp(`the persisted ledger in ${ledgerDir()} .*--restore-ledger .*--reset`));
      },
    );
  });

  it('refuses a state directory it cannot write in one line naming the directory and the problem', async () => {
    await mkdir(stateDir, { recursive: true });
    await chmod(stateDir, 0o555);

    const refused = await localUp(['--state-dir', stateDir], { dropRoot: true });

    expectRefused(
      refused,
      new RegExp(`the state directory ${stateDir} is not writable \\(EACCES: permission denied\\)`),
    );
  });

  it('refuses a state directory it cannot create in one line naming it', async () => {
    await chmod(root, 0o555);

    const refused = await localUp(['--state-dir', stateDir], { dropRoot: true });

    expectRefused(refused, new RegExp(`cannot create the state directory ${stateDir} \\(EACCES: permission denied\\)`));
  });
});
