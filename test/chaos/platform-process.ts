/**
 * The platform process of a chaos run: the local platform (tools/local/platform.ts: emulators, git
 * server, pollers, the same processors as on AWS) started with --persist semantics from the run's
 * state directory, with fault injectors at its boundaries (./injectors.ts) and the open_pr stage
 * talking to the GitHub stand-in the harness runs. The harness kills it with SIGKILL and starts it
 * again; it may also kill itself at a planned point (after a push, before a delete, while a test
 * command runs).
 *
 * Prints one JSON line when ready: the platform's description (platform.json).
 */
import { Octokit } from '@octokit/core';
import { GitHubPullRequestHost } from '../../src/adapters/github-pr-host';
import { localGit } from '../../src/compose/local';
import { createLocalClients } from '../../tools/local/emulators';
import { startPlatform } from '../../tools/local/platform';
import { quietKnownWarnings } from '../../tools/local/quiet-warnings';
import { CHAOS_BACKOFF, CHAOS_WORKERS, CONFIG_ENV, type PlatformProcessConfig } from './config';
import { FaultLog } from './fault-log';
import { TransientJobError } from '../../src/core/errors';
import { REPO_OWNER } from './git-proxy';
import {
  KillSwitch,
  directCheckout,
  faultyRunner,
  gitWithFaults,
  injectDynamoDbFaults,
  injectSqsFaults,
  killDuringRuns,
} from './injectors';
import { Random } from './random';

async function main(): Promise<void> {
  quietKnownWarnings();
  const config = JSON.parse(process.env[CONFIG_ENV] ?? '') as PlatformProcessConfig;
  const log = new FaultLog(config.faultLog);
  const rng = new Random(`${config.seed}/platform/${config.life}`);
  const kill = new KillSwitch(config.selfKill, log);
  const paused = new Set<string>();
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  // The test runner checks out from the git server itself, not through the flaky proxy (its faults
  // are injected at the runner port), as a build reaches the git host without the sequencer's path.
  let gitUrl: string | undefined;
  const directUrl = (url: string) => {
    const proxied = `${config.gitProxyUrl}/${REPO_OWNER}/`;
    if (gitUrl === undefined || !url.startsWith(proxied))
      throw new TransientJobError(`chaos: no direct address for ${url} yet`);
    return `${gitUrl}/${url.slice(proxied.length)}`;
  };
  const platform = await startPlatform({
    stateDir: config.stateDir,
    persist: true,
    output: null,
    logLevel: 'WARN',
    backoff: CHAOS_BACKOFF,
    workers: CHAOS_WORKERS,
    decorateParts: (parts) => ({
      ...parts,
      // The platform's own adapter (it holds the platform's credential for the git server).
      git: gitWithFaults(parts.git ?? localGit(parts.workRoot), kill, paused, log),
      testRunner: faultyRunner(
        killDuringRuns(
          directCheckout(parts.testRunner, (url) => directUrl(url)),
          kill,
          config.runTag,
        ),
        { rng: rng.fork('runner'), rates: config.rates, log },
      ),
      prHost: new GitHubPullRequestHost(
        async () => new Octokit({ baseUrl: config.githubUrl, auth: 'chaos-token', log: quiet }),
      ),
      // The agents' repository URLs name the proxy: it is this platform's git host.
      gitHosts: { hosts: [new URL(config.gitProxyUrl).host], localAddresses: true },
    }),
  });
  gitUrl = platform.info.gitUrl;
  const raw = createLocalClients(platform.info.endpoints);
  injectDynamoDbFaults(platform.emulators.clients.dynamodb, { rng: rng.fork('dynamodb'), rates: config.rates, log });
  injectSqsFaults(platform.emulators.clients.sqs, {
    rng: rng.fork('sqs'),
    rates: config.rates,
    log,
    raw: raw.sqs,
    beforeDelete: () => kill.reached('before-delete'),
    paused,
  });
  process.stdout.write(`${JSON.stringify(platform.info)}\n`);
  const stop = () => {
    void platform.stop().finally(() => {
      raw.destroy();
      process.exit(0);
    });
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
