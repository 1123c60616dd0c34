/**
 * The local platform keeps its ports across restarts. Repository URLs (`http://127.0.0.1:<port>/
 * <name>.git`), queue URLs and endpoints all contain a port, and an agent that re-sends a job after
 * a restart sends the URL it had: the ledger's digest covers the job's payload, repository URL
 * included, so a new port would turn the safe re-send into a CONFLICT, and a workspace stays bound
 * to the URL it was first given. Making the digest ignore "the platform's own" host would let one
 * job id stand for two different repositories; keeping the URL stable keeps the rule simple.
 *
 * The ports a platform got are recorded in `<stateDir>/ports.json` when it starts and asked for
 * again at the next start from the same state directory. `--reset` deletes the file with the rest
 * of the state; a port given explicitly wins (and is recorded).
 */
import * as path from 'node:path';
import * as z from 'zod/mini';
import '../../contract/zod-english';
import { readIfPresent, writeFileAtomic } from './write-atomic';

export const PORTS_FILE = 'ports.json';

export interface PlatformPorts {
  readonly sqs?: number;
  readonly dynamodb?: number;
  readonly git?: number;
}

// Zod Mini: the full build brings the messages of every locale into the CLI's bundle (bin/cli-bundle.js).
const portSchema = z.int().check(z.minimum(1), z.maximum(65_535));
const portsSchema = z.partial(z.strictObject({ sqs: portSchema, dynamodb: portSchema, git: portSchema }));

export class PortInUseError extends Error {
  override readonly name = 'PortInUseError';
}

export class InvalidPortsFileError extends Error {
  override readonly name = 'InvalidPortsFileError';
}

export function portsFile(stateDir: string): string {
  return path.join(stateDir, PORTS_FILE);
}

/** The ports recorded by an earlier start from this state directory; none when there was none. */
export async function readRecordedPorts(stateDir: string): Promise<PlatformPorts> {
  const file = portsFile(stateDir);
  const text = await readIfPresent(file);
  if (text === undefined) return {};
  let parsed: ReturnType<typeof portsSchema.safeParse>;
  try {
    parsed = portsSchema.safeParse(JSON.parse(text));
  } catch (error) {
    throw new InvalidPortsFileError(
      `${file} is not JSON (${(error as Error).message}): delete it to let the platform choose new ports (repository URLs then change)`,
    );
  }
  if (!parsed.success) {
    throw new InvalidPortsFileError(
      `${file} does not hold ports (${parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; ')}): delete it to let the platform choose new ports (repository URLs then change)`,
    );
  }
  return parsed.data;
}

/** A port given explicitly (non-zero) wins; otherwise the recorded one; otherwise 0 (a free port). */
export function choosePorts(requested: PlatformPorts, recorded: PlatformPorts): Required<PlatformPorts> {
  const pick = (key: keyof PlatformPorts) => requested[key] || recorded[key] || 0;
  return { sqs: pick('sqs'), dynamodb: pick('dynamodb'), git: pick('git') };
}

export async function recordPorts(stateDir: string, ports: Required<PlatformPorts>): Promise<void> {
  await writeFileAtomic(portsFile(stateDir), `${JSON.stringify(ports, null, 2)}\n`);
}

/** The port of a `http://host:port` URL. */
export function portOf(url: string): number {
  return Number(new URL(url).port);
}

/**
 * Turns a bind failure on a recorded port into an error that says why that port is wanted and
 * what to do; anything else passes through.
 */
export function explainBindFailure(error: unknown, stateDir: string, recorded: PlatformPorts): unknown {
  const { code, port } = (error ?? {}) as { code?: unknown; port?: unknown };
  if (code !== 'EADDRINUSE') return error;
  const name = (Object.keys(recorded) as (keyof PlatformPorts)[]).find((key) => recorded[key] === port);
  const which = name ? `the ${name} port ${String(port)} recorded in ${portsFile(stateDir)}` : `port ${String(port)}`;
  // Not --reset: it deletes the whole state directory (repositories, ledger) to get new ports.
  const flag = name ? `--port-${name}` : '--port-<name>';
  return new PortInUseError(
    `${which} is in use by another process. The platform keeps its ports so repository and queue URLs stay the same across restarts: ` +
      `stop what uses the port, or start with ${flag} <another port> (repository URLs then change: re-sent jobs with the old URLs are refused as CONFLICT).`,
    { cause: error },
  );
}
