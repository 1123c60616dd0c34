/**
 * The Lambda composition loads an SDK client package only when a port that uses it is first used
 * (src/compose/aws.ts), and the sequencer its git engine only at its first git call: building a
 * handler's dependencies loads none, and a path that never calls S3 never loads it. Each such
 * package is replaced by a factory that records its load and returns the real package, in a
 * module registry of its own.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { build } from 'esbuild';
import { COMMAND_JOB_TYPES, JOB_TYPES, JOB_TYPE_NAMES, SEQUENCER } from '../../contract/job-types';
import { stackEsbuildOptions } from '../../lib/constructs/worker';
import { ENV, stageDlqUrlEnv, stageQueueUrlEnv } from '../../contract/runtime-env';
import type * as FirstUse from '../../src/compose/first-use';
import type * as AwsSequencer from '../../src/compose/aws-sequencer';
import type * as AwsBuildEvents from '../../src/compose/aws-build-events';
import type * as AwsOpenPr from '../../src/compose/aws-open-pr';

const SDK_PACKAGES = [
  '@aws-sdk/client-codebuild',
  '@aws-sdk/client-dynamodb',
  '@aws-sdk/client-eventbridge',
  '@aws-sdk/client-s3',
  '@aws-sdk/client-secrets-manager',
  '@aws-sdk/client-sqs',
  '@aws-sdk/lib-dynamodb',
  '@aws-sdk/util-dynamodb',
];
const RECORDED = [...SDK_PACKAGES, 'isomorphic-git', '@octokit/core'];
const ROOT = join(__dirname, '..', '..');

const pipelineEnv = {
  [ENV.ledgerTable]: 'ledger',
  [ENV.ledgerRetentionDays]: '30',
  [ENV.leaseSeconds]: '180',
  [ENV.maxReceiveCount]: '5',
  [ENV.visibilityTimeoutSeconds]: String(SEQUENCER.timeoutSeconds * 6),
  [ENV.dlqUrl]: 'https://sqs.eu-west-1.amazonaws.com/1/dlq',
  [ENV.eventBus]: 'bus',
};
const sequencerEnv = {
  ...pipelineEnv,
  [ENV.diffBucket]: 'diffs',
  [ENV.gitCredentialsSecretArn]: 'arn:aws:secretsmanager:eu-west-1:1:secret:git',
  ...Object.fromEntries(
    JOB_TYPE_NAMES.flatMap((type) =>
      JOB_TYPES[type].lane === 'staged'
        ? [[stageQueueUrlEnv(type), `https://sqs.eu-west-1.amazonaws.com/1/${type}`]]
        : [],
    ),
  ),
};

/** Loads `modules` in a fresh registry where every SDK package and the git engine record their load in the returned list. */
function withRecordedSdk<T>(load: () => T): { loaded: string[]; value: T } {
  const loaded: string[] = [];
  let value: T | undefined;
  jest.isolateModules(() => {
    for (const pkg of RECORDED) {
      jest.doMock(pkg, () => {
        loaded.push(pkg);
        return jest.requireActual(pkg);
      });
    }
    value = load();
  });
  return { loaded, value: value as T };
}

afterEach(() => jest.resetModules());

describe('SDK packages in the Lambda composition', () => {
  it('loads none when the sequencer builds its dependencies', () => {
    const { loaded, value: deps } = withRecordedSdk(() =>
      (require('../../src/compose/aws-sequencer') as typeof AwsSequencer).awsSequencerDeps(sequencerEnv),
    );

    expect(deps.settings.consumer).toBe('sequencer');
    expect(loaded).toEqual([]);
  });

  it('loads DynamoDB (and nothing else) at the first use of the ledger', () => {
    const { loaded, value: deps } = withRecordedSdk(() =>
      (require('../../src/compose/aws-sequencer') as typeof AwsSequencer).awsSequencerDeps(sequencerEnv),
    );

    expect(typeof deps.ledger.getJob).toBe('function');
    expect(loaded.sort()).toEqual(['@aws-sdk/client-dynamodb', '@aws-sdk/lib-dynamodb', '@aws-sdk/util-dynamodb']);
  });

  it("loads S3 only when the sequencer's diff store is used", () => {
    const { loaded, value: deps } = withRecordedSdk(() =>
      (require('../../src/compose/aws-sequencer') as typeof AwsSequencer).awsSequencerDeps(sequencerEnv),
    );
    void deps.ledger.getJob;
    void deps.events.publish;
    void deps.queueOps.send;
    expect(loaded).not.toContain('@aws-sdk/client-s3');
  });

  it('loads the git engine at the first git call, and no SDK package with it', () => {
    const { loaded, value: deps } = withRecordedSdk(() =>
      (require('../../src/compose/aws-sequencer') as typeof AwsSequencer).awsSequencerDeps(sequencerEnv),
    );
    expect(loaded).toEqual([]);

    expect(typeof deps.git.branchHead).toBe('function');
    expect(loaded).toEqual(['isomorphic-git']);
  });

  it("loads the git engine from the file the bundling names (the catalog's separate file), not from its sources", async () => {
    const [gitEngine] = SEQUENCER.separateFiles ?? [];
    if (gitEngine === undefined) throw new Error('the catalog gives the sequencer no separate file');
    const dir = await mkdtemp(join(tmpdir(), 'git-engine-'));
    const globals = globalThis as Record<string, unknown>;
    try {
      const file = join(dir, gitEngine.file);
      await build({ entryPoints: [join(ROOT, gitEngine.entry)], outfile: file, ...stackEsbuildOptions(ROOT) });
      // What esbuild's define does to the bundle, done at run time: the name, relative to the module.
      globals[gitEngine.constant] = relative(join(ROOT, 'src', 'compose'), file);
      const { loaded, value: deps } = withRecordedSdk(() =>
        (require('../../src/compose/aws-sequencer') as typeof AwsSequencer).awsSequencerDeps(sequencerEnv),
      );

      expect(typeof deps.git.branchHead).toBe('function');
      // isomorphic-git came bundled in the file, not from its package.
      expect(loaded).toEqual([]);
    } finally {
      delete globals[gitEngine.constant];
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('loads neither Octokit nor Secrets Manager when open_pr builds its dependencies, and both at its first pull request', () => {
    const env = {
      ...pipelineEnv,
      [ENV.githubTokenSecretArn]: 'arn:aws:secretsmanager:eu-west-1:1:secret:token',
      [ENV.githubContentPerMinute]: '16',
      [ENV.githubContentPerHour]: '100',
    };
    const { loaded, value: deps } = withRecordedSdk(() =>
      (require('../../src/compose/aws-open-pr') as typeof AwsOpenPr).awsOpenPrDeps(env),
    );
    expect(loaded).toEqual([]);

    expect(typeof deps.host.findOrCreate).toBe('function');
    // The host is made; Secrets Manager loads when it first reads the token, the client at the first request.
    expect(loaded).toEqual(['@octokit/core']);
  });

  it('loads none when the build-events function builds its dependencies', () => {
    const env = {
      ...pipelineEnv,
      ...Object.fromEntries(
        COMMAND_JOB_TYPES.map((type) => [stageDlqUrlEnv(type), `https://sqs.eu-west-1.amazonaws.com/1/${type}-dlq`]),
      ),
    };
    const { loaded } = withRecordedSdk(() =>
      (require('../../src/compose/aws-build-events') as typeof AwsBuildEvents).awsBuildEventsDeps(env),
    );
    expect(loaded).toEqual([]);
  });
});

describe('onFirstUse', () => {
  const { onFirstUse } = jest.requireActual<typeof FirstUse>('../../src/compose/first-use');

  it('makes the adapter at the first property read, once, with its methods bound to it', async () => {
    let made = 0;
    class Counter {
      private calls = 0;
      async next(): Promise<number> {
        return ++this.calls;
      }
    }
    const port = onFirstUse(() => {
      made += 1;
      return new Counter();
    });
    expect(made).toBe(0);

    const { next } = port;
    await expect(next()).resolves.toBe(1);
    await expect(port.next()).resolves.toBe(2);
    expect(made).toBe(1);
  });

  it('surfaces an error of the factory at the first use', () => {
    const port = onFirstUse<{ run(): void }>(() => {
      throw new Error('no client');
    });
    expect(() => port.run()).toThrow('no client');
  });
});
