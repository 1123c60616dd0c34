import { rename, writeFile } from 'node:fs/promises';

/** Readers never see a half-written file, and a crash never leaves a torn one: write aside, then rename over. */
export async function writeFileAtomic(file: string, content: string): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, content);
  await rename(temporary, file);
}
