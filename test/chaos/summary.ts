/** The one summary of a chaos run: jobs, workspaces, outcomes, faults by kind, violations by invariant. */
import { INVARIANTS, RUN_INVARIANTS } from './invariants';
import type { ChaosReport } from './run';

/** Violations shown per invariant (each is counted). */
const EXAMPLES = 20;

/** The summary: jobs, workspaces, faults by kind, violations by invariant, and `violations: N`. */
export function summary(report: ChaosReport): string {
  const lines = [
    `chaos seed=${report.seed} jobs=${report.jobs} workspaces=${report.workspaces} platform starts=${report.lives} duration=${(report.durationMs / 1000).toFixed(0)}s`,
    `items: ${Object.entries(report.items)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
    'outcomes:',
    ...Object.entries(report.outcomes).map(([k, n]) => `  ${k.padEnd(40)} ${n}`),
    'observed:',
    ...Object.entries(report.observed).map(([k, n]) => `  ${k.padEnd(48)} ${n}`),
    `faults injected: ${Object.values(report.faults).reduce((a, b) => a + b, 0)}`,
    ...Object.entries(report.faults).map(([k, n]) => `  ${k.padEnd(40)} ${n}`),
    'violations by invariant:',
    ...[...INVARIANTS, ...RUN_INVARIANTS].map((name) => `  ${name.padEnd(40)} ${report.violations[name]?.length ?? 0}`),
    ...Object.entries(report.violations).flatMap(([name, list]) => [
      ...list.slice(0, EXAMPLES).map((v) => `  [${name}] ${v}`),
      ...(list.length > EXAMPLES ? [`  [${name}] ... and ${list.length - EXAMPLES} more`] : []),
    ]),
    ...(report.dir ? [`kept: ${report.dir}`] : []),
    `violations: ${report.violationCount}`,
  ];
  return `${lines.join('\n')}\n`;
}
