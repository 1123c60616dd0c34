/**
 * A local test runner in a process of its own, for tests that kill it with SIGKILL mid-run, as a
 * crash or `kill -9` of the platform would: it starts one run (config as JSON in argv[2]), prints
 * `started <buildId>` and then waits to be killed.
 */
import type { Confinement } from '../../tools/local/confinement';
import { runKey } from '../../src/core/jobs/command-stage';
import { LocalTestRunner } from '../../tools/local/test-runner';
import { runTestsMessage } from './stage-messages';

export interface RunnerProcessConfig {
  readonly stateDir: string;
  /** As LocalTestRunnerOptions.scratchDir. */
  readonly scratchDir: string;
  readonly repoUrl: string;
  readonly sha: string;
  readonly command: string;
  /** As LocalTestRunnerOptions.confinement. @default what the machine allows */
  readonly confinement?: Confinement;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as RunnerProcessConfig;
  const runner = new LocalTestRunner({
    stateDir: config.stateDir,
    scratchDir: config.scratchDir,
    ...(config.confinement && { confinement: config.confinement }),
  });
  const job = runTestsMessage({
    jobId: 'job-killed',
    payload: { command: config.command },
    pin: { sha: config.sha, repoUrl: config.repoUrl, branch: 'main' },
  });
  const { buildId } = await runner.start({
    job,
    run: 0,
    key: runKey(job, 0, new Date().toISOString()),
    command: config.command,
    timeoutSeconds: 600,
  });
  process.stdout.write(`started ${buildId}\n`);
  setInterval(() => undefined, 60_000);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
