/** The `agent-jobs` CLI. Everything lives in src/cli; this file only connects the terminal. */
import { COMMANDS } from '../src/cli/commands';
import { processIo, runCli } from '../src/cli/main';
import { quietKnownWarnings } from '../src/local/quiet-warnings';

// Before any command runs: the SDK and the SQS emulator, loaded by commands, emit the known notices.
quietKnownWarnings();
void runCli(process.argv.slice(2), processIo(), COMMANDS).then((code) => {
  process.exitCode = code;
});
