/**
 * Writes the wire contract's JSON Schema (src/core/wire-schema.ts) to contract/schema/, replacing
 * what is there: `npm run schema` after a change to the envelope, a payload schema or the catalog.
 * test/unit/wire-schema.test.ts fails until the files match the code.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { WIRE_SCHEMA_DIR, wireSchemaFiles } from '../src/core/wire-schema';

const dir = path.join(__dirname, '..', WIRE_SCHEMA_DIR);
const files = wireSchemaFiles();
mkdirSync(dir, { recursive: true });
for (const stale of readdirSync(dir).filter((file) => !(file in files))) rmSync(path.join(dir, stale));
for (const [file, text] of Object.entries(files)) writeFileSync(path.join(dir, file), text);
process.stdout.write(`wrote ${Object.keys(files).length} schemas to ${WIRE_SCHEMA_DIR}/\n`);
