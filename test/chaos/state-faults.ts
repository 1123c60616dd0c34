/**
 * Faults on the platform's state directory, as a careless user deals them, injected by the harness
 * around the platform's lives with the real CLI (`agent-jobs local up`, a process of its own):
 *
 * - `start.second-with-reset`: while the platform runs, its platform.json moved away, a second
 *   `local up --reset --persist` on its state directory. It must be refused in one line naming the running platform (its pid),
 *   before anything is deleted: the run's own invariants then find every repository, job and
 *   commit where it was.
 * - `ledger.damaged` (detail: how): before a restart after a kill, the ledger's files are damaged
 *   (one of test/support/ledger-damage.ts: garbage in CURRENT, a corrupt MANIFEST, the files
 *   emptied, the ledger's directory gone) and a start is tried. It
 *   must be refused in one line naming the ledger and the way out; the files are then put back as
 *   they were and the platform starts on them.
 *
 * A refusal that does not come, or comes otherwise, is a violation of the invariant `state`.
 */
import { existsSync } from 'node:fs';
import { cp, rename, rm } from 'node:fs/promises';
import * as path from 'node:path';
import { dynamoDbEmulatorOf } from '../../tools/local/emulators';
import { LEDGER_DIR, MANIFEST_FILE } from '../../tools/local/persisted-ledger';
import { PLATFORM_FILE } from '../../tools/local/state-dir';
import { ledgerDamages } from '../support/ledger-damage';
import { localUp, type LocalUpRun } from '../support/local-up';
import type { FaultLog } from './fault-log';
import type { Random } from './random';

/** Exit code of a refused start (tools/cli/errors.ts EXIT.unavailable). */
const REFUSED = 5;

/** Why the run is not a one-line refusal that `says` accepts, or undefined when it is. */
function refusalProblem(run: LocalUpRun, says: (line: string) => boolean): string | undefined {
  const lines = run.stderr.trim().split('\n');
  if (run.code === REFUSED && run.stdout === '' && lines.length === 1 && says(lines[0] ?? '')) return undefined;
  return `exit ${run.code}, ${run.stdout === '' ? 'nothing on stdout' : 'it started'}, stderr: ${run.stderr.trim().slice(0, 400)}`;
}

/**
 * A second start with --reset while the platform (pid `runningPid`) runs and its platform.json is
 * gone (put back after: the harness's sends through the CLI read it): refused, naming it.
 */
export async function secondStartWithReset(
  stateDir: string,
  runningPid: number,
  log: FaultLog,
): Promise<string | undefined> {
  log.record('start.second-with-reset');
  const info = path.join(stateDir, PLATFORM_FILE);
  await rename(info, `${info}.chaos-kept`);
  let run: LocalUpRun;
  try {
    run = await localUp(['--reset', '--persist', '--state-dir', stateDir]);
  } finally {
    await rename(`${info}.chaos-kept`, info).catch(() => undefined);
  }
  const problem = refusalProblem(
    run,
    (line) =>
      line.includes(`already running from ${stateDir} (pid ${runningPid},`) &&
      line.includes('nothing was deleted or started'),
  );
  return problem && `a second start with --reset while the platform ran: ${problem}`;
}

/** Damages the stopped platform's ledger one way, tries a start (refused, naming the ledger), then puts the files back. */
export async function damagedLedgerStart(stateDir: string, rng: Random, log: FaultLog): Promise<string | undefined> {
  const damages = ledgerDamages(dynamoDbEmulatorOf());
  const how = rng.pick(Object.keys(damages));
  const ledgerDir = path.join(stateDir, LEDGER_DIR);
  // What a start that was not refused could change: the ledger's files and the state manifest.
  const keep = [ledgerDir, path.join(stateDir, MANIFEST_FILE)].filter((file) => existsSync(file));
  for (const file of keep) await cp(file, `${file}.chaos-kept`, { recursive: true });
  log.record('ledger.damaged', how);
  try {
    await damages[how]?.(ledgerDir);
    const run = await localUp(['--persist', '--state-dir', stateDir]);
    const problem = refusalProblem(
      run,
      (line) => line.includes(`the persisted ledger in ${ledgerDir} `) && line.includes('--reset'),
    );
    return problem && `a start on a ledger with ${how}: ${problem}`;
  } finally {
    for (const file of keep) {
      await rm(file, { recursive: true, force: true });
      await rename(`${file}.chaos-kept`, file);
    }
  }
}
