/**
 * A persisted local ledger that lost the writes only its LevelDB log held, through the CLI: `local
 * up --persist` runs long enough for LevelDB to move the start's generation marker out of its log
 * into a table file (its 4 MiB write buffer filled), records a job, is killed with `kill -9`, and
 * every log file of the ledger is emptied. The next `local up --persist` must refuse the ledger,
 * naming what is wrong and the way out, instead of starting on what is left.
 *
 * The long run's writes are filler items put straight into the ledger table through the emulator
 * (what hours of jobs would write), so the test takes seconds. dynalite keeps LevelDB files;
 * DynamoDB Local keeps one SQLite file, which has no separate log (its loss shows as a lost table).
 */
import { readdir, truncate } from 'node:fs/promises';
import * as path from 'node:path';
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { EXIT } from '../../tools/cli/errors';
import { createLocalClients, dynamoDbEmulatorOf, LOCAL_TABLE_NAME } from '../../tools/local/emulators';
import { localUp } from '../support/local-up';
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from './harness';

jest.setTimeout(240_000);

/** More than LevelDB's 4 MiB write buffer, in items under DynamoDB's 400 KB item limit. */
const FILLER_ITEMS = 14;
const FILLER_BYTES = 380 * 1024;

let platform: RunningPlatform | undefined;

afterAll(async () => {
  await platform?.stop().catch(() => undefined);
  await removeScratch();
});

async function fillWriteBuffer({ sqs = '', dynamodb = '', s3 = '' }: Record<string, string>): Promise<void> {
  const clients = createLocalClients({ sqs, dynamodb, s3 });
  try {
    for (let i = 0; i < FILLER_ITEMS; i++) {
      await clients.dynamodb.send(
        new PutItemCommand({
          TableName: LOCAL_TABLE_NAME,
          Item: { pk: { S: `filler#${i}` }, data: { S: 'x'.repeat(FILLER_BYTES) } },
        }),
      );
    }
  } finally {
    clients.destroy();
  }
}

(dynamoDbEmulatorOf() === 'dynalite' ? test : test.skip)(
  'every log file of the ledger emptied after a kill -9: the next start refuses the ledger, naming it and the way out',
  async () => {
    platform = await startPlatform({ persist: true });
    const { stateDir } = platform;
    await fillWriteBuffer(platform.ready.endpoints);
    const source = await makeRepository({ 'app.txt': 'one\n' }, []);
    const repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'kept'])).url;
    const [diff] = await diffChain(source, [{ 'app.txt': 'two\n' }]);
    await platform.cliJson(applyPatchArgs('ws-kept', 'kept-1', repoUrl, 'main', diff ?? '', 'Kept'));
    await platform.cliJson(['wait', 'kept-1', '--timeout', '120']);
    await platform.kill();
    platform = undefined;
    const ledgerDir = path.join(stateDir, 'dynamodb');
    const logs = (await readdir(ledgerDir)).filter((name) => name.endsWith('.log'));
    expect(logs.length).toBeGreaterThan(0);
    for (const log of logs) await truncate(path.join(ledgerDir, log), 0);

    const again = await localUp(['--persist', '--state-dir', stateDir]);

    expect({ code: again.code, stdout: again.stdout }).toEqual({ code: EXIT.unavailable, stdout: '' });
    expect(again.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(
        new RegExp(
          `the persisted ledger in ${ledgerDir} lost data: its log files \\(${logs.join(', ')}\\) are empty.*--reset`,
        ),
      ),
    ]);
  },
);
