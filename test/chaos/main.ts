/**
 * `npm run chaos -- --jobs N --workspaces W --seed S [--kills K] [--kills-during-runs K] [--rates R] [--keep]`: one chaos run
 * (./run.ts), its summary on stdout, exit code 1 on any violation (2 on bad arguments).
 */
import { parseArgs } from 'node:util';
import { quietKnownWarnings } from '../../tools/local/quiet-warnings';
import { parseRates } from './config';
import { runChaos } from './run';
import { summary } from './summary';

const USAGE =
  'usage: npm run chaos -- --jobs N --workspaces W --seed S [--kills K] [--kills-during-runs K] [--rates none,name=p,...] [--keep] [--quiet]';

function positive(values: Record<string, string | boolean | undefined>, name: string, fallback?: number): number {
  const raw = values[name];
  if (raw === undefined && fallback !== undefined) return fallback;
  const value = Number(raw);
  if (typeof raw !== 'string' || !Number.isInteger(value) || value < 0)
    throw new UsageError(`--${name} must be a whole number, got ${JSON.stringify(raw)}`);
  return value;
}

class UsageError extends Error {
  override readonly name = 'UsageError';
}

function rates(text: string) {
  try {
    return parseRates(text);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

async function main(): Promise<number> {
  quietKnownWarnings();
  let options: Parameters<typeof runChaos>[0];
  try {
    const { values } = parseArgs({
      options: {
        jobs: { type: 'string' },
        workspaces: { type: 'string' },
        seed: { type: 'string' },
        kills: { type: 'string' },
        'kills-during-runs': { type: 'string' },
        rates: { type: 'string' },
        keep: { type: 'boolean' },
        quiet: { type: 'boolean' },
      },
      strict: true,
    });
    if (values.seed === undefined) throw new UsageError('--seed is required');
    const jobs = positive(values, 'jobs');
    const workspaces = positive(values, 'workspaces');
    if (workspaces < 1 || jobs < workspaces) throw new UsageError('--workspaces must be at least 1 and at most --jobs');
    options = {
      jobs,
      workspaces,
      seed: values.seed,
      kills: positive(values, 'kills', 2),
      killsDuringRuns: positive(values, 'kills-during-runs', 0),
      ...(values.rates !== undefined && { rates: rates(values.rates) }),
      keep: values.keep === true,
      ...(values.quiet
        ? {}
        : { progress: (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`) }),
    };
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const report = await runChaos(options);
  process.stdout.write(summary(report));
  return report.violationCount === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
