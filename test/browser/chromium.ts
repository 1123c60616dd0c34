/**
 * Chromium for the browser tests: Debian's package (apt-get install chromium), or the binary
 * CHROMIUM_PATH names, driven by playwright-core (which downloads no browser of its own). Each
 * launch gets a fresh profile directory, removed on close, and the flags that keep Chromium off
 * the network (no background requests, no updates, no sync): the tests reach only 127.0.0.1.
 * jest.config.js leaves these tests out, in one line, when no Chromium is installed, except under
 * CI=true, where a missing Chromium fails them (.ci/run installs it).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Browser {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

export async function launchChromium(viewport = { width: 1280, height: 800 }): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH))
    throw new Error(`no Chromium at ${CHROMIUM_PATH}: apt-get install chromium (.ci/run does), or set CHROMIUM_PATH`);
  const profile = await mkdtemp(path.join(tmpdir(), 'agent-jobs-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    args: FLAGS,
    viewport,
    headless: true,
  });
  // A shared, loaded machine: every wait ends on what it waits for, so a long bound costs nothing when all is well.
  context.setDefaultTimeout(90_000);
  context.setDefaultNavigationTimeout(90_000);
  return {
    context,
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/**
 * The URL of a console page: the console keeps its pages under a random root, which a browser
 * reaches by opening the printed URL (`root` is where that landed, e.g. new URL('.', page.url())).
 */
export function consoleAt(root: string, pathname: string): string {
  return new URL(pathname.replace(/^\//, ''), root).toString();
}
