/**
 * The runbook's advice for a failure reason, read from the README's "Failure reasons" table: one
 * text for people in the terminal, on the README and in the console, so the advice cannot drift
 * between them (test/unit/operator.test.ts checks that every reason the platform records has a row).
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { PROJECT_ROOT } from '../local/state-dir';

export interface RunbookAdvice {
  /** The reasons of the row (a row may cover several: `PATCH_DOES_NOT_APPLY`, `BASE_MISMATCH`, ...). */
  readonly reasons: readonly string[];
  /** What it means and what to do, as the README words them (Markdown: `code` spans). */
  readonly meaning: string;
  readonly recovery: string;
  /**
   * The meaning says the failure leaves the workspace BLOCKED (the state's name, in capitals): true
   * of the job only while it blocks it (adviceHolds).
   */
  readonly blocksWorkspace: boolean;
}

/** How a failed or skipped job stands now, as far as the runbook's words depend on it. */
export interface FailureNow {
  /** Still as recorded: FAILED and not dismissed, or SKIPPED. A dismissal or a cancel settled it. */
  readonly open: boolean;
  /** Its workspace is BLOCKED by it (a failure), or BLOCKED (a skipped job). */
  readonly blocking: boolean;
}

/**
 * Whether a row still describes the job: a row is the advice for a failure as it was recorded, so
 * it holds while the failure is open and, for a row that says the workspace is BLOCKED, while the
 * job blocks it. Otherwise the row is what the failure meant when it happened (the console says
 * so, and where the job stands now).
 */
export function adviceHolds(advice: RunbookAdvice, now: FailureNow): boolean {
  return now.open && (!advice.blocksWorkspace || now.blocking);
}

const TABLE_HEADING = '| reason | meaning | recovery |';

/** The rows of the README's failure-reason table, by reason. */
export function parseRunbook(markdown: string): Map<string, RunbookAdvice> {
  const lines = markdown.split('\n');
  const start = lines.findIndex((line) => line.trim() === TABLE_HEADING);
  const advice = new Map<string, RunbookAdvice>();
  if (start < 0) return advice;
  // The heading, its separator row, then rows until the first line that is not one.
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((cell) => cell.trim());
    const [names, meaning, recovery] = cells;
    if (names === undefined || meaning === undefined || recovery === undefined) continue;
    const reasons = [...names.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1] ?? '');
    const row = { reasons, meaning, recovery, blocksWorkspace: /\bBLOCKED\b/.test(meaning) };
    for (const reason of reasons) advice.set(reason, row);
  }
  return advice;
}

let runbook: Map<string, RunbookAdvice> | undefined;

/** The advice for a reason; undefined for one the runbook does not name (or a README that cannot be read). */
export function runbookAdvice(reason: string): RunbookAdvice | undefined {
  if (runbook === undefined) {
    let text = '';
    try {
      text = readFileSync(path.join(PROJECT_ROOT, 'README.md'), 'utf8');
    } catch {
      // A copy of the code without its README: the console shows the reason alone.
    }
    runbook = parseRunbook(text);
  }
  return runbook.get(reason);
}
