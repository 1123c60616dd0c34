/**
 * The reference pages (docs/reference/) are what bin/reference-docs.ts makes from the CLI's
 * command table, the configuration schema and contract/schema/: a changed command, setting or
 * schema without `npm run docs` fails here, naming the page.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REFERENCE_DIR, referencePages, typeText } from '../../bin/reference-docs';
import { commandHelp } from '../../tools/cli/command';
import { COMMANDS } from '../../tools/cli/commands';
import { PROGRAM } from '../../tools/cli/main';
import { SETTING_NAMES } from '../../lib/config';
import { ROOT } from '../infra/helpers';

const pages = referencePages();

it.each(Object.keys(pages).map((file) => `${REFERENCE_DIR}/${file}`))(
  '%s is what the code makes (else: npm run docs)',
  (file) => {
    expect(readFileSync(join(ROOT, file), 'utf8')).toBe(pages[file.slice(REFERENCE_DIR.length + 1)]);
  },
);

it("cli.md holds each command's own help", () => {
  for (const command of COMMANDS) expect(pages['cli.md']).toContain(commandHelp(command, PROGRAM, { globals: false }));
});

it('configuration.md has a row, with a description, for every setting', () => {
  const rows = new Map(
    [...(pages['configuration.md'] ?? '').matchAll(/^\| `([^`]+)` \|.*\| ([^|]*) \|$/gm)].map((m) => [m[1], m[2]]),
  );
  expect([...rows.keys()].sort()).toEqual([...SETTING_NAMES].sort());
  expect([...rows].filter(([, description]) => !description?.trim())).toEqual([]);
});

it('writes a type as a phrase', () => {
  expect(typeText({ type: 'integer', exclusiveMinimum: 0, maximum: Number.MAX_SAFE_INTEGER })).toBe('integer >= 1');
  expect(typeText({ type: 'string', minLength: 1, maxLength: 200 })).toBe('string, 1-200 characters');
  expect(typeText({ anyOf: [{ type: 'array', items: { type: 'string' } }, { type: 'string' }] })).toBe(
    'list of string, or string',
  );
  expect(typeText({ type: 'string', const: 'apply_patch' })).toBe('`"apply_patch"`');
});
