import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { PlatformAlreadyRunningError, readPlatformInfo, startPlatform, type LocalPlatform } from '../../src/local/platform';

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
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
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
      (await platform.emulators.clients.dynamodb.send(new GetCommand({ TableName: platform.info.tableName, Key: { pk: item.pk }, ConsistentRead: true }))).Item;
    const second = await start();
    expect(await read(second)).toEqual(item);
    await second.stop();

    const third = await start({ reset: true });
    expect(await read(third)).toBeUndefined();
  });

  it('stops on SIGINT: removes platform.json, closes every port and lets the process exit by itself', async () => {
    // `local up` as npm start runs it. The process must end on its own after stop(): a leaked
    // timer, socket or child keeps it alive.
    const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'bin', 'agent-jobs.js'), 'local', 'up', '--state-dir', stateDir], {
      cwd: PROJECT_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
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
    for (const url of [info!.endpoints.sqs, info!.endpoints.dynamodb, info!.gitUrl]) expect(await listening(url)).toBe(false);
  });
});
