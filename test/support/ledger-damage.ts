/**
 * Ways a persisted local ledger's files get damaged or lose data, for the emulator that keeps them
 * (emulators.ts dynamoDbEmulatorOf): dynalite keeps LevelDB files (CURRENT, MANIFEST-*, *.log,
 * *.ldb), DynamoDB Local one SQLite file. The hostile suite and the chaos harness both use them.
 */
import { readdir, rm, truncate, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import type { DynamoDbEmulator } from '../../tools/local/emulators';

type Damage = (ledgerDir: string) => Promise<void>;

async function eachFile(
  dir: string,
  matches: (name: string) => boolean,
  act: (file: string) => Promise<void>,
): Promise<void> {
  for (const name of await readdir(dir)) if (matches(name)) await act(path.join(dir, name));
}

/** Damages the files can take, by name, for `emulator`: each leaves a ledger a start must refuse. */
export function ledgerDamages(emulator: DynamoDbEmulator): Readonly<Record<string, Damage>> {
  const common: Record<string, Damage> = {
    'its files emptied': (dir) =>
      eachFile(
        dir,
        () => true,
        (file) => truncate(file, 0),
      ),
    'its directory deleted': (dir) => rm(dir, { recursive: true }),
  };
  if (emulator !== 'dynalite') return common;
  return {
    ...common,
    'garbage in CURRENT': (dir) => writeFile(path.join(dir, 'CURRENT'), 'garbage\n'),
    'a corrupt MANIFEST': (dir) =>
      eachFile(
        dir,
        (name) => name.startsWith('MANIFEST-'),
        (file) => writeFile(file, Buffer.alloc(64, 0xa5)),
      ),
  };
}

/**
 * Loses the ledger's latest writes while its files stay readable: LevelDB's log emptied (what a
 * clean stop's mark is in), or DynamoDB Local's database emptied.
 */
export function loseLatestWrites(emulator: DynamoDbEmulator): Damage {
  return emulator === 'dynalite'
    ? (dir) =>
        eachFile(
          dir,
          (name) => name.endsWith('.log'),
          (file) => truncate(file, 0),
        )
    : (dir) =>
        eachFile(
          dir,
          (name) => name.endsWith('.db'),
          (file) => truncate(file, 0),
        );
}
