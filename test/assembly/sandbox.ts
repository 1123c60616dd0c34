/**
 * Where the assembly run's functions execute: a network namespace of their own (util-linux
 * `unshare`, a user namespace so that no privilege is needed, iproute2 `ip`), as a Lambda
 * execution environment has its own network. Inside, fixed addresses stand for the services the
 * functions reach: AWS's endpoint (AWS_ENDPOINT_URL), the git host and GitHub, each by a name in
 * the namespace's own /etc/hosts; each address leads, through a unix socket, to a server of the run
 * on the host's loopback (sandbox-network.cjs). So the template can name fixed hosts, and the git
 * engine's guard, which refuses loopback addresses on AWS, dials the git host as it would there.
 *
 * Each function process enters the namespace with `nsenter` and gets a /tmp of its own (a tmpfs of
 * the function's ephemeral storage size), as each Lambda execution environment does.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A host the functions reach by name: its address inside, and the port on the host's loopback it leads to. */
export interface SandboxHost {
  readonly name: string;
  readonly address: string;
  readonly port: number;
  readonly hostPort: number;
}

export interface Sandbox {
  /** Spawns `command` inside the namespace, with a private tmpfs /tmp of `tmpMb`. */
  spawn(command: string, args: readonly string[], options: SpawnOptions & { tmpMb: number }): ChildProcess;
  stop(): Promise<void>;
}

/** Why a sandbox cannot be made on this machine, or undefined. */
export function sandboxUnavailable(): string | undefined {
  if (process.platform !== 'linux') return `network namespaces are Linux only (this is ${process.platform})`;
  for (const [tool, args] of [
    ['unshare', ['-rn', 'true']],
    ['nsenter', ['--version']],
    ['ip', ['-V']],
  ] as const) {
    const probe = spawnSync(tool, args, { stdio: 'ignore' });
    if (probe.status !== 0)
      return `\`${tool} ${args.join(' ')}\` fails here (${probe.error?.message ?? `exit ${probe.status}`}): util-linux and iproute2 are needed`;
  }
  return undefined;
}

export async function startSandbox(hosts: readonly SandboxHost[]): Promise<Sandbox> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-jobs-sandbox-'));
  const hostsFile = join(dir, 'hosts');
  writeFileSync(hostsFile, ['127.0.0.1 localhost', ...hosts.map((h) => `${h.address} ${h.name}`)].join('\n') + '\n');
  // The outside end of each forward: a unix socket to the server's loopback port.
  const bridges: Server[] = await Promise.all(
    hosts.map(
      (host, i) =>
        new Promise<Server>((resolve, reject) => {
          const server = createServer((socket) => {
            const upstream = connect(host.hostPort, '127.0.0.1');
            socket.pipe(upstream).pipe(socket);
            socket.on('error', () => upstream.destroy());
            upstream.on('error', () => socket.destroy());
          });
          server.once('error', reject);
          server.listen(join(dir, `${i}.sock`), () => resolve(server));
        }),
    ),
  );
  const config = {
    hostsFile,
    addresses: [...new Set(hosts.map((h) => h.address).filter((a) => !a.startsWith('127.')))],
    forwards: hosts.map((h, i) => ({ host: h.address, port: h.port, socket: join(dir, `${i}.sock`) })),
  };
  const inside = spawn(
    'unshare',
    [
      '-rnm',
      '--propagation',
      'private',
      process.execPath,
      join(__dirname, 'sandbox-network.cjs'),
      JSON.stringify(config),
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  inside.stderr!.on('data', (d) => (stderr += d));
  await new Promise<void>((resolve, reject) => {
    inside.stdout!.on('data', (d) => String(d).includes('ready') && resolve());
    inside.once('exit', (code) => reject(new Error(`the sandbox's network did not start (exit ${code}): ${stderr}`)));
  });
  const pid = String(inside.pid);
  return {
    spawn(command, args, { tmpMb, ...options }) {
      // nsenter joins the namespaces; a mount namespace of its own gives the process a private /tmp.
      // A checkout under /tmp (the binary, the assets in cdk.out) is bound back into it, through
      // /mnt of this namespace for a moment, or the tmpfs would hide the function's own code.
      const kept = topDirsUnderTmp([command, ...args, String(options.cwd ?? '')]);
      const keep = kept.map((d) => `mkdir -p '/tmp/${d}' && mount --bind '/mnt/${d}' '/tmp/${d}' && `).join('');
      const script = kept.length
        ? `mount --bind /tmp /mnt && mount -t tmpfs -o size=${tmpMb}m tmpfs /tmp && ${keep}umount -l /mnt && exec "$@"`
        : `mount -t tmpfs -o size=${tmpMb}m tmpfs /tmp && exec "$@"`;
      return spawn(
        'nsenter',
        [
          '-t',
          pid,
          '-U',
          '-n',
          '-m',
          '--preserve-credentials',
          '--',
          'unshare',
          '-m',
          '--propagation',
          'private',
          '/bin/sh',
          '-c',
          script,
          'sh',
          command,
          ...args,
        ],
        options,
      );
    },
    async stop() {
      inside.kill('SIGKILL');
      await Promise.all(bridges.map((b) => new Promise((resolve) => b.close(resolve))));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The first directory under /tmp of each absolute path below it (`/tmp/x/y` gives `x`), once each. */
function topDirsUnderTmp(paths: readonly string[]): string[] {
  const dirs = paths.filter((p) => p.startsWith('/tmp/')).map((p) => p.slice('/tmp/'.length).split('/')[0]!);
  // Quoted in a shell script: a name with a quote is not something this run makes.
  return [...new Set(dirs)].filter((d) => d && !d.includes("'"));
}
