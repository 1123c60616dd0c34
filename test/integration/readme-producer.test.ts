/**
 * The README's "From code" section, as an agent's project follows it: `npm run pack:producer`
 * here, `npm install` of the tarball into an empty project, then the README's code block, unchanged, is
 * type-checked there and run against the local queues (emulated SQS). The job it sends is read
 * back from the queue as the sequencer would read it.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { parseEnvelope } from '../../src/core/envelope';
import { drain } from '../support/drive-queue';
import { withEmulators } from '../support/emulators';

const execFileP = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');

jest.setTimeout(240_000);

/** The code blocks of a README section, by language. */
function sectionBlocks(readme: string, heading: string, language: string): string[] {
  const start = readme.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`README.md has no section ${heading}`);
  const end = readme.indexOf('\n#', start + heading.length + 2);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1] ?? '');
}

describe("the README's From code example", () => {
  const env = withEmulators();
  let project: string;

  beforeAll(async () => {
    project = await mkdtemp(path.join(tmpdir(), 'agent-project-'));
  });
  afterAll(async () => {
    if (project) await rm(project, { recursive: true, force: true });
  });

  it('installs into an agent project, type-checks and sends its job', async () => {
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    const [commands, ...moreCommands] = sectionBlocks(readme, '### From code', 'sh');
    const [code, ...moreCode] = sectionBlocks(readme, '### From code', 'ts');
    expect({ moreCommands, moreCode }).toEqual({ moreCommands: [], moreCode: [] });
    // The README's two commands: the pack here, the install there (of the tarball the pack wrote).
    expect(commands).toMatch(/^npm run pack:producer\b/m);
    expect(commands).toMatch(/^npm install \S*agent-jobs-producer-\S+\.tgz/m);

    const packed = await execFileP('npm', ['run', '--silent', 'pack:producer', '--', project], { cwd: ROOT });
    const tarball = packed.stdout.trim().split('\n').pop() ?? '';
    expect(path.basename(tarball)).toMatch(/^agent-jobs-producer-.+\.tgz$/);
    await writeFile(
      path.join(project, 'package.json'),
      JSON.stringify({ name: 'agent', private: true, type: 'module' }),
    );
    // Offline: the package's dependencies (the SDK clients, zod) are linked from this project's
    // node_modules, at the versions it names, so npm installs the tarball without the registry.
    const manifest = await execFileP('tar', ['-xzOf', tarball, 'package/package.json']);
    for (const name of Object.keys(
      (JSON.parse(manifest.stdout) as { dependencies: Record<string, string> }).dependencies,
    )) {
      await mkdir(path.dirname(path.join(project, 'node_modules', name)), { recursive: true });
      await symlink(path.join(ROOT, 'node_modules', name), path.join(project, 'node_modules', name));
    }
    await execFileP('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: project });

    await writeFile(path.join(project, 'agent.ts'), code ?? '');
    await writeFile(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          noEmit: true,
          types: ['node'],
          typeRoots: [path.join(ROOT, 'node_modules/@types')],
        },
        files: ['agent.ts'],
      }),
    );
    await execFileP(path.join(ROOT, 'node_modules/.bin/tsc'), ['-p', project], { cwd: project }).catch(
      (error: { stdout: string }) => {
        throw new Error(`the README's example does not type-check in an agent's project:\n${error.stdout}`);
      },
    );

    const diff = 'diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-flaky\n+fixed\n';
    await writeFile(path.join(project, 'change.diff'), diff);
    const queueUrl = env().queueUrls['agent-jobs'] ?? '';
    const run = await execFileP(path.join(ROOT, 'node_modules/.bin/tsx'), ['agent.ts'], {
      cwd: project,
      env: {
        ...process.env,
        AGENT_JOBS_QUEUE_URL: queueUrl,
        AGENT_JOBS_DIFF_BUCKET: env().bucketName,
        AWS_ENDPOINT_URL: env().endpoints.sqs,
        NODE_OPTIONS: `--require ${path.join(ROOT, 'test/support/localhost-names.cjs')}`,
        AWS_REGION: 'us-east-1',
        AWS_ACCESS_KEY_ID: 'local',
        AWS_SECRET_ACCESS_KEY: 'local',
      },
    });

    const jobId = /^sent (\S+)$/m.exec(run.stdout)?.[1];
    const [message, ...rest] = await drain(env().clients.sqs, queueUrl);
    expect(rest).toEqual([]);
    expect(parseEnvelope(message?.Body)).toMatchObject({
      jobId,
      workspaceId: 'ws1',
      tenantId: 'acme',
      type: 'apply_patch',
      payload: {
        repo: { url: 'https://github.com/acme/app.git', branch: 'agent/ws1' },
        diff,
        message: 'Fix the flaky test',
      },
    });
  });
});
