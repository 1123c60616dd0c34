/**
 * Jest helper: one set of local emulators per test file (started in beforeAll, stopped in
 * afterAll). Call it at describe level; the returned getter is valid inside tests and hooks.
 */
import { startEmulators, type EmulatorOptions, type LocalEmulators } from '../../tools/local/emulators';

export function withEmulators(options?: EmulatorOptions): () => LocalEmulators {
  let emulators: LocalEmulators | undefined;
  beforeAll(async () => {
    emulators = await startEmulators(options);
  });
  afterAll(async () => {
    await emulators?.stop();
  });
  return () => {
    if (!emulators)
      throw new Error(
        'emulators are not running: call withEmulators() at describe level and use the getter inside tests',
      );
    return emulators;
  };
}

export type { LocalEmulators };
