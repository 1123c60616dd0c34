/**
 * The test build's buildspec, run on this machine (emulated CodeBuild: no AWS here). The commands
 * of the synthesized project's pre_build and build phases run in order in one bash, as buildspec
 * version 0.2 runs them (one shell; a failing command fails its phase and the build), with the
 * environment CodeBuild gives: the read-only credential from Secrets Manager, the variables the
 * command stage sets at StartBuild, the container credentials URI. The git remote is the loopback
 * server with a read grant for the one repository.
 *
 * What it shows: the pinned commit is checked out with the credential, and the test command then
 * runs as an unprivileged user with a clean environment: it holds no credential and cannot read
 * the environment of the build's own shell.
 *
 * It runs as root in private mount and PID namespaces, so `useradd` changes a copy of /etc and the
 * machine keeps its users. Root is needed for that (CI has it); elsewhere the test is skipped.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { TEST_BUILD_ENV } from '../../contract/runtime-env';
import { PlatformGitAccess } from '../../tools/local/git-access';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import { synth } from '../infra/helpers';
import { render, resourcesOf, type TemplateJson } from '../infra/template';
import { createRepo } from '../support/git-fixtures';

const run = promisify(execFile);
const AS_ROOT = process.getuid?.() === 0;

/** The buildspec's pre_build and build commands, as the synthesized template holds them. */
function buildCommands(): string[] {
  const template = synth().template.toJSON() as TemplateJson;
  const [[, project] = []] = resourcesOf(template, 'AWS::CodeBuild::Project');
  const spec = JSON.parse(render(project?.Properties?.['Source']?.BuildSpec)) as {
    version: string;
    phases: Record<'pre_build' | 'build', { commands: string[] }>;
  };
  expect(spec.version).toBe('0.2');
  return [...spec.phases.pre_build.commands, ...spec.phases.build.commands];
}

(AS_ROOT ? describe : describe.skip)('the test build, emulated', () => {
  let scratch: string;
  let server: GitServer;
  let access: PlatformGitAccess;
  let sha: string;
  let commands: string[];

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'test-build-spec-'));
    access = new PlatformGitAccess();
    server = await startGitServer({ root: join(scratch, 'repos'), access });
    await mkdir(join(scratch, 'source'));
    sha = await createRepo(join(scratch, 'source'), { 'test.sh': 'echo checked out\n', 'app.txt': 'one\n' });
    await server.importRepository(join(scratch, 'source'), 'app');
    commands = buildCommands();
  });
  afterAll(async () => {
    await server.close();
    await rm(scratch, { recursive: true, force: true });
  });

  /** Runs the build with `testCommand`; its exit code and output. */
  async function build(testCommand: string): Promise<{ code: number; output: string }> {
    const dir = await mkdtemp(join(scratch, 'build-'));
    await mkdir(join(dir, 'src'));
    await mkdir(join(dir, 'root-home'), { mode: 0o700 });
    const grant = access.grantRead('app');
    const env = {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: join(dir, 'root-home'),
      CODEBUILD_SRC_DIR: join(dir, 'src'),
      AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/v2/credentials/build-role-secret',
      GIT_USERNAME: grant.auth.username,
      GIT_PASSWORD: grant.auth.password,
      [TEST_BUILD_ENV.repoUrl]: server.repoUrl('app'),
      [TEST_BUILD_ENV.commitSha]: sha,
      [TEST_BUILD_ENV.testCommand]: testCommand,
      [TEST_BUILD_ENV.jobId]: 'job-1',
      [TEST_BUILD_ENV.jobType]: 'run_tests',
      [TEST_BUILD_ENV.run]: '0',
      GIT_CONFIG_NOSYSTEM: '1',
    };
    // A private copy of /etc (useradd's changes stay in it) and an empty /home, in namespaces of the build's own.
    const setup = `cp -a /etc "${dir}/etc" && mount --bind "${dir}/etc" /etc && mount -t tmpfs build-home /home && exec bash -e "${dir}/build.sh"`;
    await writeFile(join(dir, 'build.sh'), commands.join('\n'));
    try {
      const { stdout, stderr } = await run(
        'unshare',
        ['--mount', '--pid', '--fork', '--mount-proc', '--', 'bash', '-c', setup],
        { env, timeout: 60_000 },
      );
      return { code: 0, output: stdout + stderr };
    } catch (error) {
      const e = error as { code?: number; stdout?: string; stderr?: string };
      return { code: e.code ?? -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
    } finally {
      grant.revoke();
    }
  }

  it('runs the command at the pinned commit, and its exit code is the verdict', async () => {
    const passed = await build('bash test.sh');
    const failed = await build('echo "2 tests failed"; exit 3');

    expect(passed).toMatchObject({ code: 0, output: expect.stringContaining('checked out\n') });
    expect(failed).toMatchObject({ code: 3, output: expect.stringContaining('2 tests failed') });
  });

  it("runs the command as an unprivileged user holding no credential, with no way to the build shell's environment", async () => {
    const reached = (what: string, command: string) =>
      `if ${command} >/dev/null 2>&1; then echo "REACHED ${what}"; fi;`;
    const { code, output } = await build(
      [
        'echo "uid=$(id -u)";',
        reached(
          'credential in the environment',
          'env | cut -d= -f1 | grep -q -x -e GIT_USERNAME -e GIT_PASSWORD -e AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
        ),
        reached('build shell environment', 'grep -q -a GIT_PASSWORD /proc/1/environ'),
        reached('credential helper', 'git config --global --get credential.helper'),
        reached('fetch without the build', 'git ls-remote "$REPO_URL"'),
        reached('root', 'touch /etc/agent-jobs-owned'),
        'touch own-file && echo "writes its checkout";',
        'echo "job=$JOB_ID type=$JOB_TYPE run=$JOB_RUN sha=$COMMIT_SHA";',
      ].join(' '),
    );

    expect(code).toBe(0);
    expect(output).not.toContain('REACHED');
    expect(output).toMatch(/^uid=[1-9]\d*$/m);
    expect(output).toContain('writes its checkout');
    expect(output).toContain(`job=job-1 type=run_tests run=0 sha=${sha}`);
  });
});
