/**
 * HTML from a tagged template that escapes every interpolated value unless it is Html already:
 * the console's pages are a few server-rendered tables, and a template engine would bring a
 * language and a build step for what these 30 lines do. Ids, reasons, commit messages and log
 * lines all come from agents or the network: nothing reaches a page unescaped.
 */

/** Markup known to be safe (built by `html`, or escaped). */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

function render(value: Value): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  return new Html(
    strings.reduce((out, part, i) => out + part + (i < values.length ? render(values[i] as Value) : ''), ''),
  );
}

/** Markdown's `code` spans as <code>, the rest escaped (the runbook's cells). */
export function inlineCode(markdown: string): Html {
  return new Html(
    markdown
      .split(/`([^`]*)`/)
      .map((part, i) => (i % 2 === 1 ? `<code>${escapeHtml(part)}</code>` : escapeHtml(part)))
      .join(''),
  );
}
