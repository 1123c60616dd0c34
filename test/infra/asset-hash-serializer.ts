/**
 * Jest snapshot serializer: replaces content hashes (asset hashes, S3 asset keys, asset parameter
 * names) with a placeholder, so a snapshot changes when the infrastructure changes, not when a
 * handler's code or a dependency does.
 */
import type { Config, NewPlugin, Printer, Refs } from 'pretty-format';
import { ASSET_HASH, ASSET_HASH_PLACEHOLDER as PLACEHOLDER } from '../../lib/release-templates';

const serializer: NewPlugin = {
  test: (value: unknown): boolean => typeof value === 'string' && new RegExp(ASSET_HASH.source).test(value),
  serialize: (
    value: string,
    config: Config,
    indentation: string,
    depth: number,
    refs: Refs,
    printer: Printer,
  ): string => printer(value.replace(ASSET_HASH, PLACEHOLDER), config, indentation, depth, refs),
};

export = serializer;
