import { readFile, rename, writeFile } from 'node:fs/promises';

/** Readers never see a half-written file, and a crash never leaves a torn one: write aside, then rename over. */
export async function writeFileAtomic(file: string, content: string): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, content);
  await rename(temporary, file);
}

/** A state file's text, or undefined when there is none (a directory no platform has used yet). */
export async function readIfPresent(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
