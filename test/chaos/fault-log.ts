/**
 * Where injected faults are counted: one JSON line per fault, appended synchronously, so a fault
 * that kills the process (kill -9 after a push) is on disk before the process dies. The platform
 * process and the harness write to the same file; the summary counts it by kind.
 */
import { appendFileSync, readFileSync } from 'node:fs';

export interface FaultEntry {
  readonly kind: string;
  /** What it hit (a job id, an operation), for reading a run's story. */
  readonly detail?: string;
}

export class FaultLog {
  constructor(readonly file: string) {}

  record(kind: string, detail?: string): void {
    appendFileSync(
      this.file,
      `${JSON.stringify({ kind, ...(detail === undefined ? {} : { detail }), at: new Date().toISOString() })}\n`,
    );
  }

  /** Faults by kind, from the file (a line cut by a kill is ignored). */
  counts(): Record<string, number> {
    let text = '';
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    const counts: Record<string, number> = {};
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        const { kind } = JSON.parse(line) as FaultEntry;
        counts[kind] = (counts[kind] ?? 0) + 1;
      } catch {
        // a partial last line
      }
    }
    return Object.fromEntries(Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)));
  }
}
