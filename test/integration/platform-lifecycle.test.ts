import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createServer } from 'node:net';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { JsonlEventLog } from '../../src/adapters/events';
import { localLedger } from '../../src/compose/local';
import { eventDetail } from '../../src/core/pipeline';
import {
  PlatformAlreadyRunningError,
  PortInUseError,
  readPlatformInfo,
  startPlatform,
  type LocalPlatform,
} from '../../tools/local/platform';
import { portsFile } from '../../tools/local/stable-ports';
import { claimOf, newJob } from '../support/ledger-contract';

const PROJECT_ROOT = path.resolve(__dirname, '..', '..');

function listening(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.once('connect', () => socket.destroy() && resolve(true)).once('error', () => resolve(false));
  });
}

// Each test starts whole platforms (emulators, git server, pollers): allow for a busy 2-core machine.
jest.setTimeout(120_000);

describe('local platform lifecycle', () => {
  let stateDir: string;
  const started: LocalPlatform[] = [];
  const children: ChildProcess[] = [];
  const start = async (options: Parameters<typeof startPlatform>[0] = {}) => {
    const platform = await startPlatform({ stateDir, output: null, ...options });
    started.push(platform);
    return platform;
  };

  beforeEach(async () => {
    stateDir = path.join(await mkdtemp(path.join(tmpdir(), 'agent-jobs-lifecycle-')), 'state');
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((p) => p.stop()));
    // A platform child that did not exit (a failed test) must not outlive the test.
    for (const child of children.splice(0))
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await rm(path.dirname(stateDir), { recursive: true, force: true });
  });

  it('refuses to start a second platform on a running state directory', async () => {
    await start();
    await expect(start()).rejects.toThrow(PlatformAlreadyRunningError);
  });

  it('keeps the ledger across restarts, and --reset clears it', async () => {
    const item = { pk: 'ws#kept', state: 'ACTIVE', seq: 0 };
    const first = await start();
    await first.emulators.clients.dynamodb.send(new PutCommand({ TableName: first.info.tableName, Item: item }));
    await first.stop();

    const read = async (platform: LocalPlatform) =>
      (
        await platform.emulators.clients.dynamodb.send(
          new GetCommand({ TableName: platform.info.tableName, Key: { pk: item.pk }, ConsistentRead: true }),
        )
      ).Item;
    const second = await start();
    expect(await read(second)).toEqual(item);
    await second.stop();

    const third = await start({ reset: true });
    expect(await read(third)).toBeUndefined();
  });

  it('keeps its ports across a restart, so repository and queue URLs stay the same', async () => {
    const first = await start();
    const { info } = first;
    await first.stop();

    const second = await start();

    expect(second.info).toMatchObject({
      endpoints: info.endpoints,
      gitUrl: info.gitUrl,
      queueUrls: info.queueUrls,
      dlqUrls: info.dlqUrls,
    });
    expect(second.git.repoUrl('app')).toBe(first.git.repoUrl('app'));
  });

  it('refuses to start on a recorded port another process holds, naming the port and the file', async () => {
    const first = await start();
    const gitPort = first.git.port;
    await first.stop();
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(gitPort, '127.0.0.1', resolve));
    try {
      const refused = start();
      await expect(refused).rejects.toThrow(PortInUseError);
      await expect(refused).rejects.toThrow(`the git port ${gitPort} recorded in ${portsFile(stateDir)} is in use`);
      // Another port, not --reset: that deletes the whole state directory.
      await expect(refused).rejects.toThrow(/--port-git <another port>/);
      await expect(refused).rejects.not.toThrow(/--reset/);
      // Nothing half-started stays behind: the state directory is free for the next start.
      expect(await readPlatformInfo(stateDir)).toBeUndefined();
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });

  it('ends the leases a dead run left, so re-sent jobs run at once, and counts them as unfinished', async () => {
    const first = await start({ persist: true });
    // A worker of the first run claimed a job and died: its lease (15 minutes) is still live.
    const orphan = newJob();
    const claim = claimOf(orphan, { now: Date.now(), leaseMs: 15 * 60_000 });
    expect((await localLedger(first.emulators).claim(claim)).kind).toBe('claimed');
    await first.stop();

    const second = await start({ persist: true });

    expect(second.unfinishedAtStart).toBe(1);
    const ledger = localLedger(second.emulators);
    expect((await ledger.getJob(orphan.jobId))?.leaseUntil).toBeLessThanOrEqual(Date.now());
    expect(await ledger.claim(claimOf(orphan, { now: Date.now() }))).toMatchObject({
      kind: 'claimed',
      record: { attempt: 2 },
    });
  });

  // Seen in a chaos run: a worker recorded SUCCEEDED and the platform was killed before the event;
  // the message died with the queues and the agent's re-send through the CLI's door sent nothing.
  it('announces at start the outcomes the last run recorded but did not announce, once', async () => {
    const first = await start({ persist: true });
    const ledger = localLedger(first.emulators);
    const events = new JsonlEventLog(first.info.eventLog);
    const succeed = async (job = newJob()) => {
      const claim = claimOf(job, { now: Date.now() });
      await ledger.claim(claim);
      return ledger.complete({
        jobId: job.jobId,
        owner: claim.owner,
        now: Date.now(),
        verdict: { status: 'SUCCEEDED', result: { commitSha: 'c'.repeat(40) } },
      });
    };
    const announced = await succeed();
    await events.publish(
      'AgentJobSucceeded',
      eventDetail(announced, { status: 'SUCCEEDED', result: announced.result ?? {} }, announced.attempt),
    );
    const missed = await succeed();
    await first.stop();

    await start({ persist: true });

    const outcomes = (await events.readFrom(0)).events.map((e) => [e.type, e.detail['jobId'], e.detail['result']]);
    expect(outcomes).toEqual([
      ['AgentJobSucceeded', announced.jobId, { commitSha: 'c'.repeat(40) }],
      ['AgentJobSucceeded', missed.jobId, { commitSha: 'c'.repeat(40) }],
    ]);
  });

  it('stops on SIGINT: removes platform.json, closes every port and lets the process exit by itself', async () => {
    // `local up` as npm start runs it. The process must end on its own after stop(): a leaked
    // timer, socket or child keeps it alive.
    const child = spawn(
      process.execPath,
      [path.join(PROJECT_ROOT, 'bin', 'agent-jobs.js'), 'local', 'up', '--state-dir', stateDir],
      {
        cwd: PROJECT_ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = once(child, 'exit');
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (stdout.includes('Ctrl-C to stop')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`platform exited early (${code}): ${stdout}${stderr}`)));
    });
    const info = await readPlatformInfo(stateDir);
    expect(info?.pid).toBe(child.pid);

    child.kill('SIGINT');
    const [code] = await exited;
    expect({ code, stderr }).toEqual({ code: 0, stderr: 'local platform stopped\n' });
    expect(await readPlatformInfo(stateDir)).toBeUndefined();
    for (const url of [info!.endpoints.sqs, info!.endpoints.dynamodb, info!.gitUrl])
      expect(await listening(url)).toBe(false);
  });
});
