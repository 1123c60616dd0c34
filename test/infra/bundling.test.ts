/**
 * One real synth with esbuild (local, no Docker): every handler of the catalog is bundled on its
 * own, minified, with a source map, and without the AWS SDK (the Lambda runtime provides it).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Template } from 'aws-cdk-lib/assertions';
import { allWorkers } from '../../contract/job-types';
import { addStack, newApp } from './helpers';

let outdir: string;
beforeAll(() => {
  outdir = mkdtempSync(join(tmpdir(), 'agent-jobs-bundle-'));
});
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

it('bundles each handler separately with esbuild', () => {
  const app = newApp({ bundle: true, outdir });
  const stack = addStack(app, 'dev');
  const template = Template.fromStack(stack);
  const assembly = app.synth();

  const bundles = allWorkers().map(({ name }) => {
    const lane = stack.lanes.find((l) => l.spec.consumer === name);
    const fn = template.toJSON().Resources[stack.getLogicalId(lane?.worker.function.node.defaultChild as never)];
    // The S3 key is the asset hash; the cloud assembly stages the bundle as asset.<hash>/.
    const hash = String(fn.Properties.Code.S3Key).replace(/\.zip$/, '');
    return join(assembly.directory, `asset.${hash}`);
  });
  expect(new Set(bundles).size).toBe(allWorkers().length);
  for (const dir of bundles) {
    const code = readFileSync(join(dir, 'index.js'), 'utf8');
    expect(existsSync(join(dir, 'index.js.map'))).toBe(true);
    expect(code).toMatch(/handler/);
    expect(code).not.toMatch(/not built yet/);
    // @aws-sdk/* stays external: required at run time, never inlined.
    expect(code).toMatch(/require\("@aws-sdk\/client-sqs"\)/);
  }
}, 180_000);
