/** Text formatting for people; `--json` output bypasses all of this. */
import { alignRows } from './command';

export type Cell = string | number | boolean | undefined | null;

/** A table with a header row; empty cells print as "-". */
export function table(columns: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const text = [columns, ...rows.map((r) => r.map(cell))];
  const widths = columns.map((_, i) => Math.max(...text.map((r) => (r[i] ?? '').length)));
  return text
    .map((r) =>
      r
        .map((c, i) => (c ?? '').padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** `key  value` lines for one record, skipping absent values; a value of several lines stays in its column. */
export function fields(entries: readonly (readonly [string, Cell | Record<string, unknown>])[]): string {
  const present = entries.filter(([, v]) => v !== undefined && v !== null);
  const width = Math.max(0, ...present.map(([k]) => k.length));
  const text = (v: Cell | Record<string, unknown>) =>
    (typeof v === 'object' && v !== null ? JSON.stringify(v) : cell(v)).replace(/\n/g, `\n${' '.repeat(width + 2)}`);
  return alignRows(
    present.map(([k, v]) => [k, text(v)] as const),
    '',
  ).join('\n');
}

function cell(value: Cell): string {
  if (value === undefined || value === null || value === '') return '-';
  return String(value);
}
