import { join } from 'node:path';
import { DEFAULT_COMMAND_LIMITS } from '../../contract/job-types';
import { cgroupParentsFrom } from '../../tools/local/cgroups';
import {
  confinedCommand,
  describeIsolation,
  hiddenPaths,
  homeToolchains,
  type Isolation,
} from '../../tools/local/confinement';
import { SANDBOX_PATHS, sandboxArgs, sandboxLaunchers, type SandboxSpec } from '../../tools/local/sandbox';
import { limitReached } from '../../tools/local/test-runner';

describe('hiddenPaths (the namespaces level)', () => {
  it('hides the given directories and the whole HOME when no tool in PATH lives there', () => {
    expect(hiddenPaths(['/state'], { PATH: '/usr/local/bin:/usr/bin' }, '/home/dev')).toEqual(['/state', '/home/dev']);
  });

  it('hides only the credentials in HOME when a toolchain in PATH lives there, so it keeps working', () => {
    const hidden = hiddenPaths(['/state'], { PATH: '/home/dev/.nvm/versions/node/v22/bin:/usr/bin' }, '/home/dev');

    expect(hidden).not.toContain('/home/dev');
    expect(hidden).toEqual(
      expect.arrayContaining([
        '/state',
        join('/home/dev', '.aws'),
        join('/home/dev', '.ssh'),
        join('/home/dev', '.npmrc'),
        join('/home/dev', '.git-credentials'),
      ]),
    );
    expect(hidden.filter((p) => p.startsWith('/home/dev/.nvm'))).toEqual([]);
  });

  it('never hides / (a HOME of /) and ignores relative PATH entries', () => {
    expect(hiddenPaths(['/state'], { PATH: '/usr/bin' }, '/')).toEqual(['/state']);
    expect(hiddenPaths([], { PATH: 'bin:/usr/bin' }, '/home/dev')).toEqual(['/home/dev']);
  });
});

describe('homeToolchains (bound back read-only into the sandbox, HOME hidden)', () => {
  it("takes a version manager's directory for its bin or shims entry, any other entry for itself, each once", () => {
    const PATH = [
      '/home/dev/.nvm/versions/node/v22/bin',
      '/home/dev/.pyenv/shims',
      '/home/dev/.pyenv/bin',
      '/home/dev/tools',
      '/usr/bin',
      'relative/bin',
    ].join(':');

    expect(homeToolchains({ PATH }, '/home/dev')).toEqual([
      '/home/dev/.nvm/versions/node/v22',
      '/home/dev/.pyenv',
      '/home/dev/tools',
    ]);
  });

  it('never takes HOME itself, for ~/bin or HOME in PATH', () => {
    expect(homeToolchains({ PATH: '/home/dev/bin:/home/dev' }, '/home/dev')).toEqual(['/home/dev/bin']);
  });
});

describe('confinedCommand', () => {
  it('runs the command with plain sh, dying with the platform, where the machine cannot confine it', () => {
    const { file, args } = confinedCommand(
      { kind: 'none', reason: 'no namespaces' },
      { runDir: '/r', cwd: '/r/w', hidden: ['/s'], command: 'npm test' },
    );

    expect([file, ...args]).toEqual(
      process.platform === 'linux'
        ? ['setpriv', '--pdeathsig', 'KILL', '--', 'sh', '-c', 'npm test']
        : ['sh', '-c', 'npm test'],
    );
  });

  it('covers deeper hidden paths first, so one inside another is covered before its parent hides it', () => {
    const { file, args } = confinedCommand(
      { kind: 'namespaces', reason: 'bubblewrap is missing' },
      {
        runDir: '/tmp/runs/r',
        cwd: '/tmp/runs/r/w',
        hidden: ['/home/dev', '/home/dev/state', '/tmp/runs', '/home/dev'],
        command: 'npm test',
      },
    );

    expect([file, ...args].slice(0, 5)).toEqual(['setpriv', '--pdeathsig', 'KILL', '--', 'unshare']);
    expect(args).toContain('--kill-child');
    expect(args.slice(args.indexOf('npm test') + 1)).toEqual(['/home/dev/state', '/home/dev', '/tmp/runs']);
    expect(args.slice(args.indexOf('agent-jobs-confine') + 1, args.indexOf('npm test'))).toEqual([
      '/tmp/runs/r',
      '/tmp/runs/r/w',
    ]);
  });
});

describe('sandboxArgs', () => {
  const spec: SandboxSpec = {
    user: { uid: 65534, gid: 65534 },
    hidden: ['/home/dev', '/srv/state', '/srv/state/inner', '/tmp/agent-jobs-runs-1', '/run/user/1000'],
    readOnly: ['/home/dev/.nvm/versions/node/v22'],
    coveredFiles: ['/home/dev/.nvm/versions/node/v22/.npmrc'],
    diskBytes: 2 * 1024 * 1024 * 1024,
    network: 'slirp4netns',
    env: { PATH: '/usr/bin', HOME: SANDBOX_PATHS.home },
    command: 'npm test',
  };
  /** The values that follow each occurrence of `option`. */
  const valuesOf = (args: readonly string[], option: string) =>
    args.flatMap((arg, i) => (arg === option ? [args[i + 1]] : []));

  it('shows the host read-only and gives the run one tmpfs of its disk limit for /tmp, its workspace and HOME', () => {
    const args = sandboxArgs(spec);

    expect(args.slice(args.indexOf('--ro-bind'), args.indexOf('--ro-bind') + 3)).toEqual(['--ro-bind', '/', '/']);
    expect(args.slice(args.indexOf('/tmp') - 5, args.indexOf('/tmp') + 1)).toEqual([
      '--size',
      String(spec.diskBytes),
      '--perms',
      '0700',
      '--tmpfs',
      '/tmp',
    ]);
    expect(valuesOf(args, '--dir')).toEqual([SANDBOX_PATHS.workspace, SANDBOX_PATHS.home]);
    expect(valuesOf(args, '--chdir')).toEqual([SANDBOX_PATHS.workspace]);
  });

  it('covers each hidden directory once, outermost only, and none the sandbox replaces anyway (/tmp, /run)', () => {
    const covers = valuesOf(sandboxArgs(spec), '--tmpfs');

    expect(covers).toEqual(['/dev/shm', '/run', '/tmp', '/home/dev', '/srv/state']);
  });

  it('binds toolchains back read-only inside the hidden HOME, covers the credentials in them, then makes the cover read-only', () => {
    const args = sandboxArgs(spec);
    const from = args.indexOf('/home/dev') - 1;

    expect(args.slice(from, from + 10)).toEqual([
      '--tmpfs',
      '/home/dev',
      '--ro-bind',
      '/home/dev/.nvm/versions/node/v22',
      '/home/dev/.nvm/versions/node/v22',
      '--ro-bind',
      '/dev/null',
      '/home/dev/.nvm/versions/node/v22/.npmrc',
      '--remount-ro',
      '/home/dev',
    ]);
  });

  it('keeps every namespace of its own, no capability, no user namespaces inside, and its own environment only', () => {
    const args = sandboxArgs(spec);

    expect(args).toEqual(
      expect.arrayContaining([
        '--unshare-all',
        '--unshare-user',
        '--disable-userns',
        '--die-with-parent',
        '--new-session',
        '--clearenv',
      ]),
    );
    expect(valuesOf(args, '--setenv')).toEqual(['PATH', 'HOME']);
    expect(args).not.toContain('--cap-add');
  });

  it("joins the network namespace `unshare` made for slirp4netns, with slirp4netns's resolver; without it, has none", () => {
    const withNetwork = sandboxArgs(spec);
    const offline = sandboxArgs({ ...spec, network: 'none' });

    expect(withNetwork).toContain('--share-net');
    expect(valuesOf(withNetwork, '--ro-bind-data')).toEqual(['5']);
    expect(offline).not.toContain('--share-net');
    expect(offline).not.toContain('--ro-bind-data');
    expect(sandboxLaunchers('slirp4netns', { uid: 65534, gid: 65534 })).toEqual([
      'setpriv',
      '--reuid=65534',
      '--regid=65534',
      '--clear-groups',
      '--',
      'unshare',
      '--user',
      '--map-root-user',
      '--net',
      '--',
      'bwrap',
    ]);
    expect(sandboxLaunchers('none', undefined)).toEqual(['bwrap']);
  });

  it('runs the command last, after unpacking the checkout from stdin', () => {
    const args = sandboxArgs(spec);

    expect(args.slice(-6, -3)).toEqual(['--', 'sh', '-c']);
    expect(args.at(-3)).toMatch(/^tar -x -f - -C \/tmp\/workspace/);
    expect(args.slice(-2)).toEqual(['agent-jobs-sandbox', 'npm test']);
  });
});

describe('cgroupParentsFrom', () => {
  // As on a machine whose v1 hierarchies are mounted one per controller and the v2 one empty.
  const mounts = [
    '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
    '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
    '33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct',
    '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
    '39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids',
    '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
  ].join('\n');
  const own = ['8:pids:/', '4:memory:/session/42', '2:cpuacct:/', '1:cpu:/', '0::/'].join('\n');

  it("finds the platform's own group in each v1 hierarchy, nested where it is nested", () => {
    expect(cgroupParentsFrom(own, mounts)).toEqual([
      { version: 2, dir: '/sys/fs/cgroup/unified' },
      {
        version: 1,
        pids: '/sys/fs/cgroup/pids',
        memory: '/sys/fs/cgroup/memory/session/42',
        cpu: '/sys/fs/cgroup/cpu',
        cpuacct: '/sys/fs/cgroup/cpuacct',
      },
    ]);
  });

  it('finds a co-mounted cpu,cpuacct hierarchy for both, and none without pids or memory', () => {
    const coMounted = mounts.replace(
      /.*\/cpu rw.*\n.*\/cpuacct rw.*/,
      '32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct',
    );
    const v1 = cgroupParentsFrom(['8:pids:/', '4:memory:/', '2:cpu,cpuacct:/a', '0::/'].join('\n'), coMounted).find(
      (p) => p.version === 1,
    );

    expect(v1).toEqual({
      version: 1,
      pids: '/sys/fs/cgroup/pids',
      memory: '/sys/fs/cgroup/memory',
      cpu: '/sys/fs/cgroup/cpu,cpuacct/a',
      cpuacct: '/sys/fs/cgroup/cpu,cpuacct/a',
    });
    expect(
      cgroupParentsFrom(
        own,
        mounts
          .split('\n')
          .filter((l) => !l.includes('pids'))
          .join('\n'),
      ).map((p) => p.version),
    ).toEqual([2]);
  });

  it('reads a mount whose root is the group (a container) and skips a group outside the mount', () => {
    const container = '50 40 0:40 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw';

    expect(cgroupParentsFrom('0::/docker/abc/app', container)).toEqual([{ version: 2, dir: '/sys/fs/cgroup/app' }]);
    expect(cgroupParentsFrom('0::/elsewhere', container)).toEqual([]);
  });
});

describe('describeIsolation', () => {
  const cgroup: Isolation['resources'] = { kind: 'cgroup', parents: { version: 1, pids: '/p', memory: '/m' } };

  it('says what the full sandbox stops and what it does not, and nothing is degraded', () => {
    const report = describeIsolation({
      confinement: { kind: 'sandbox', network: 'slirp4netns', runAs: { uid: 65534, gid: 65534 } },
      resources: cgroup,
    });

    expect(report.summary).toBe(
      'sandbox (bubblewrap), as uid 65534, own network (slirp4netns), no host loopback, limits by cgroup v1 (processes, memory, CPU time)',
    );
    expect(report.stops).toEqual(
      expect.arrayContaining([
        'connections to the host loopback (emulators, git server)',
        'acting as root on host files',
      ]),
    );
    expect(report.doesNotStop).toEqual(expect.arrayContaining([expect.stringMatching(/outbound connections/)]));
    expect(report.degraded).toBeUndefined();
  });

  it('names what is missing and how to get it below the full sandbox', () => {
    expect(
      describeIsolation({
        confinement: { kind: 'sandbox', network: 'none', networkMissing: 'slirp4netns: not found' },
        resources: cgroup,
      }).degraded,
    ).toMatch(/no network .*slirp4netns: not found.*apt-get install slirp4netns/);
    expect(
      describeIsolation({
        confinement: { kind: 'namespaces', reason: 'bwrap: not found' },
        resources: { kind: 'rlimit', reason: 'not root' },
      }),
    ).toMatchObject({
      degraded: expect.stringMatching(
        /bubblewrap is not in use: bwrap: not found \(apt-get install bubblewrap slirp4netns\)/,
      ),
      doesNotStop: expect.arrayContaining([
        'connections to the host loopback (emulators, git server)',
        'a fork flood or memory use across processes (only per process)',
      ]),
    });
    expect(
      describeIsolation({
        confinement: { kind: 'none', reason: 'no Linux namespaces on darwin' },
        resources: { kind: 'rlimit', reason: 'no cgroups on darwin' },
      }).degraded,
    ).toBe('test commands run unconfined: no Linux namespaces on darwin');
  });
});

describe('limitReached', () => {
  const under = { processLimitReached: false, oomKills: 0, cpuSeconds: 1, diskFull: false };

  it('names the first limit a sample shows reached, and none under every limit', () => {
    expect(limitReached(under, DEFAULT_COMMAND_LIMITS)).toBeUndefined();
    expect(limitReached({ ...under, processLimitReached: true, oomKills: 1 }, DEFAULT_COMMAND_LIMITS)).toBe(
      'processes',
    );
    expect(limitReached({ ...under, oomKills: 2 }, DEFAULT_COMMAND_LIMITS)).toBe('memory');
    expect(limitReached({ ...under, diskFull: true }, DEFAULT_COMMAND_LIMITS)).toBe('disk');
    expect(limitReached({ ...under, cpuSeconds: DEFAULT_COMMAND_LIMITS.cpuSeconds }, DEFAULT_COMMAND_LIMITS)).toBe(
      'cpu',
    );
  });
});
