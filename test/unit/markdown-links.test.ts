/**
 * Every relative link in the repository's Markdown (README, docs/, SECURITY.md, CHANGELOG.md, ...)
 * names a file of the repository, and every `#anchor` (in the same file or `file.md#anchor`) is a
 * heading of that file as GitHub slugs it (github-slugger), or an HTML `id`/`name` there. The files
 * are parsed with marked, so a link in a code block or code span is not a link, and a reference
 * link is read through its definition. External links are not fetched: the suite runs offline.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { posix } from 'node:path';
import GithubSlugger from 'github-slugger';
import { marked, type Token } from 'marked';

const ROOT = posix.join(__dirname, '..', '..');

interface Markdown {
  readonly links: readonly string[];
  readonly anchors: ReadonlySet<string>;
}

function parse(text: string): Markdown {
  const tokens = marked.lexer(text);
  const slugger = new GithubSlugger();
  const links = Object.values(tokens.links).map((definition) => definition.href);
  const anchors = new Set<string>();
  marked.walkTokens(tokens, (token) => {
    if (token.type === 'link' || token.type === 'image') links.push((token as { href: string }).href);
    if (token.type === 'heading') anchors.add(slugger.slug(plainText((token as { tokens: Token[] }).tokens)));
    if (token.type === 'html')
      for (const [, id] of token.raw.matchAll(/\b(?:id|name)="([^"]+)"/g)) anchors.add(id ?? '');
  });
  return { links, anchors };
}

/** A heading's text as GitHub renders it (code spans' text kept, markup and HTML tags dropped): what it slugs. */
function plainText(tokens: readonly Token[]): string {
  return tokens
    .map((token) => {
      if ('tokens' in token && token.tokens) return plainText(token.tokens);
      return token.type === 'html' ? '' : ((token as { text?: string }).text ?? '');
    })
    .join('');
}

/** A scheme (`https:`, `mailto:`) or a protocol-relative `//host`: not a file of the repository. */
const EXTERNAL = /^(?:[a-z][a-z0-9+.-]*:|\/\/)/i;

/**
 * What is wrong with the links of `file` (a path relative to the root): each a line naming the
 * link. `files` is every file of the repository; `read` gives a Markdown file's text.
 */
function linkProblems(
  file: string,
  text: string,
  files: ReadonlySet<string>,
  read: (file: string) => string,
): string[] {
  const parsed = new Map<string, Markdown>([[file, parse(text)]]);
  const markdown = (target: string) => parsed.get(target) ?? parsed.set(target, parse(read(target))).get(target)!;
  const isFolder = (target: string) => [...files].some((f) => f.startsWith(`${target}/`));
  const problems: string[] = [];
  for (const link of new Set(markdown(file).links)) {
    if (EXTERNAL.test(link)) continue;
    const hash = link.indexOf('#');
    const pathPart = decodeURIComponent((hash < 0 ? link : link.slice(0, hash)).replace(/\?.*$/, ''));
    const anchor = hash < 0 ? undefined : decodeURIComponent(link.slice(hash + 1));
    const target =
      pathPart === ''
        ? file
        : posix
            .normalize(pathPart.startsWith('/') ? pathPart.slice(1) : posix.join(posix.dirname(file), pathPart))
            .replace(/\/$/, '');
    if (target.startsWith('..') || !(files.has(target) || isFolder(target))) {
      problems.push(`${file}: ${link}: no such file in the repository (${target})`);
      continue;
    }
    if (anchor && target.endsWith('.md') && !markdown(target).anchors.has(anchor)) {
      problems.push(`${file}: ${link}: ${target} has no heading with the anchor #${anchor}`);
    }
  }
  return problems;
}

/**
 * The repository's files. In a clone, git's list: tracked files and new ones not ignored (what a
 * clone has once the change is committed). In a copy without .git (the fork lane's, made from that
 * list), every file but those under node_modules or a name .gitignore lists (its glob lines name
 * no folder).
 */
function repositoryFiles(): Set<string> {
  if (existsSync(posix.join(ROOT, '.git'))) {
    return new Set(
      execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: ROOT, encoding: 'utf8' })
        .split('\0')
        .filter(Boolean),
    );
  }
  const ignored = readFileSync(posix.join(ROOT, '.gitignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim().replace(/\/$/, ''))
    .filter((line) => line && !/[#*]/.test(line));
  const skip = (file: string) =>
    ignored.some((name) => file === name || posix.basename(file) === name) ||
    file === 'node_modules' ||
    file === '.git';
  const found = new Set<string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(posix.join(ROOT, dir), { withFileTypes: true })) {
      const file = dir ? `${dir}/${entry.name}` : entry.name;
      if (skip(file)) continue;
      if (entry.isDirectory()) walk(file);
      else found.add(file);
    }
  };
  walk('');
  return found;
}

const files = repositoryFiles();
const documents = [...files].filter((f) => f.endsWith('.md')).sort();
const read = (file: string) => readFileSync(posix.join(ROOT, file), 'utf8');

it('reads the repository’s Markdown files', () => {
  expect(documents).toEqual(
    expect.arrayContaining(['README.md', 'SECURITY.md', 'CHANGELOG.md', 'docs/design.md', 'docs/reference/cli.md']),
  );
});

it.each(documents)('%s: every relative link and anchor resolves', (file) => {
  expect(linkProblems(file, read(file), files, read)).toEqual([]);
});

describe('the check', () => {
  const repo = new Set(['README.md', 'docs/a.md', 'docs/img/x.png', 'src/x.ts']);
  const texts: Record<string, string> = {
    'docs/a.md': '# Title\n\n## After a deploy: `agent-jobs doctor`\n\n## Twice\n\n## Twice\n\n<a id="kept"></a>\n',
  };
  const check = (text: string) => linkProblems('README.md', text, repo, (f) => texts[f] ?? '');

  it('accepts files, folders, headings as GitHub slugs them, repeated headings and HTML ids', () => {
    const text = [
      '# Top',
      '[a](docs/a.md) [b](./docs/a.md#after-a-deploy-agent-jobs-doctor) [c](docs/a.md#twice-1) [d](docs/a.md#kept)',
      '[e](src/) [f](/src/x.ts#L3) [g](#top) ![h](docs/img/x.png) [i](https://example.com/missing.md) [j](mailto:a@example.com)',
    ].join('\n\n');
    expect(check(text)).toEqual([]);
  });

  it('names a missing file, a missing anchor, and a link leaving the repository; a link in code is no link', () => {
    const text = [
      '[a](docs/b.md) [b](docs/a.md#twice-2) [c](#nowhere) [d](../outside.md)',
      '`[e](gone.md)`',
      '```\n[f](gone.md)\n```',
      '[r][ref]\n\n[ref]: docs/c.md',
    ].join('\n\n');
    expect(check(text)).toEqual([
      'README.md: docs/c.md: no such file in the repository (docs/c.md)',
      'README.md: docs/b.md: no such file in the repository (docs/b.md)',
      'README.md: docs/a.md#twice-2: docs/a.md has no heading with the anchor #twice-2',
      'README.md: #nowhere: README.md has no heading with the anchor #nowhere',
      'README.md: ../outside.md: no such file in the repository (../outside.md)',
    ]);
  });
});
