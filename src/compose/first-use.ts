/**
 * Making a value, or a port's adapter, when it is first needed: how the Lambda compositions defer
 * loading an SDK package, or a module, that an invocation may never call (src/compose/aws.ts says
 * why). Small and without dependencies, so that every file of a bundle can take it.
 */
import { join } from 'node:path';

/** `create()` at the first call, the same value after. */
export function lazy<T>(create: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= create());
}

/**
 * A port whose adapter is made on the first call of one of its methods: the adapter's module,
 * and the SDK package it requires, load then. The caller reads the settings the adapter takes
 * before, so a missing one still fails the first invocation with its name.
 */
export function onFirstUse<T extends object>(create: () => T): T {
  const instance = lazy(create);
  return new Proxy({} as T, {
    get(_, property) {
      const target = instance();
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * The module of one of the function's separate files (the catalog's `separateFiles`), which lie
 * beside its bundle: what a loader requires once the bundling has defined the file's constant.
 * Bundled, `__dirname` is the bundle's folder.
 */
export function requireSeparateFile(file: string): unknown {
  return require(join(__dirname, file));
}
