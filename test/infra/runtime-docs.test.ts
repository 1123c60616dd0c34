/**
 * One Node.js version for the functions: LAMBDA_NODE_MAJOR drives the runtime and esbuild's target
 * (lib/constructs/worker.ts), and the documents that name a Lambda runtime must name that one.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LAMBDA_NODE_MAJOR, lambdaRuntime } from '../../lib/constructs/worker';
import { ROOT } from './helpers';

const documents = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => join('docs', f)),
];

/** Every Lambda runtime a document names: "Node.js 24 Lambda runtime", "`nodejs24.x`". */
function runtimesNamed(text: string): number[] {
  return [...text.matchAll(/Node\.js (\d+) Lambda runtime|`nodejs(\d+)\.x`/g)].map((m) => Number(m[1] ?? m[2]));
}

it('the README names the Lambda runtime, and every document that names one names LAMBDA_NODE_MAJOR', () => {
  const named = documents.flatMap((file) =>
    runtimesNamed(readFileSync(join(ROOT, file), 'utf8')).map((major) => ({ file, major })),
  );
  expect(named.filter((n) => n.file === 'README.md').length).toBeGreaterThan(0);
  expect(named.filter((n) => n.major !== LAMBDA_NODE_MAJOR)).toEqual([]);
});

it('finds a runtime the documents disagree on (so the check above can fail)', () => {
  expect(
    runtimesNamed(`on the Node.js ${LAMBDA_NODE_MAJOR - 2} Lambda runtime (\`nodejs${LAMBDA_NODE_MAJOR - 2}.x\`)`),
  ).toEqual([LAMBDA_NODE_MAJOR - 2, LAMBDA_NODE_MAJOR - 2]);
});

it('resolves to a fixed aws-cdk-lib runtime, never the moving NODEJS_LATEST', () => {
  expect(lambdaRuntime().name).toBe(`nodejs${LAMBDA_NODE_MAJOR}.x`);
  expect(lambdaRuntime().isVariable).toBe(false);
  expect(() => lambdaRuntime(7)).toThrow(/no nodejs7\.x Lambda runtime/);
});
