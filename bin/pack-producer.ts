/**
 * `npm run pack:producer [-- <dir>]`: the producer library as a package an agent's own project
 * installs, `agent-jobs-producer-<version>.tgz` in <dir> (default `dist/`):
 *
 *   npm install /path/to/agent-jobs/dist/agent-jobs-producer-0.1.0.tgz
 *
 * The repository's package is private and carries the whole platform (CDK, emulators); this one
 * holds src/client (enqueueAgentJob, enqueueAgentJobs, newJobId, EnqueueError, S3DiffStore) as one
 * CommonJS file with its type declarations. The AWS SDK clients stay dependencies (an agent's
 * project shares its copies, and sends with its own credentials); everything else, zod included,
 * is bundled. The declarations are tsc's, for the modules src/client reaches, so they name the
 * contract's types (the job envelope) as the platform checks them.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildSync } from 'esbuild';

const ROOT = path.resolve(__dirname, '..');
const PRODUCER_PACKAGE = 'agent-jobs-producer';
/** The SDK clients the producer calls: dependencies of the package, at the versions the platform is tested with. */
const SDK_DEPENDENCIES = ['@aws-sdk/client-sqs', '@aws-sdk/client-s3'];

/** Builds and packs the producer into `outDir`; returns the tarball's path. */
export function packProducer(outDir: string): string {
  const root = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
    version: string;
    license: string;
    engines: Record<string, string>;
    dependencies: Record<string, string>;
  };
  const work = mkdtempSync(path.join(tmpdir(), 'agent-jobs-producer-'));
  try {
    buildSync({
      entryPoints: [path.join(ROOT, 'src/client/index.ts')],
      outfile: path.join(work, 'index.js'),
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      external: SDK_DEPENDENCIES,
      logLevel: 'warning',
    });
    const types = path.join(work, 'types');
    execFileSync(
      path.join(ROOT, 'node_modules/.bin/tsc'),
      [
        '--declaration',
        '--emitDeclarationOnly',
        '--strict',
        '--skipLibCheck',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--target',
        'es2022',
        '--rootDir',
        ROOT,
        '--outDir',
        types,
        path.join(ROOT, 'src/client/index.ts'),
      ],
      { cwd: ROOT, stdio: 'inherit' },
    );
    const dependencies = Object.fromEntries(
      [...SDK_DEPENDENCIES, 'zod'].map((name) => [name, root.dependencies[name]]),
    );
    writeFileSync(
      path.join(work, 'package.json'),
      `${JSON.stringify(
        {
          name: PRODUCER_PACKAGE,
          version: root.version,
          description:
            'Send jobs to an agent-jobs platform: validated, in order per workspace, claim-checked when large',
          license: root.license,
          main: 'index.js',
          types: 'types/src/client/index.d.ts',
          engines: root.engines,
          // zod: its types are in the declarations (the envelope's schemas); the code is bundled.
          dependencies,
        },
        null,
        2,
      )}\n`,
    );
    mkdirSync(outDir, { recursive: true });
    const name =
      execFileSync('npm', ['pack', '--silent', '--pack-destination', path.resolve(outDir)], {
        cwd: work,
        encoding: 'utf8',
      })
        .trim()
        .split('\n')
        .pop() ?? '';
    return path.join(path.resolve(outDir), name);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (require.main === module) {
  process.stdout.write(`${packProducer(process.argv[2] ?? path.join(ROOT, 'dist'))}\n`);
}
