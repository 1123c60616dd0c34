/** The `agent-jobs` CLI. Everything lives in tools/cli; this file only connects the terminal. */
import { COMMANDS } from '../tools/cli/commands';
import { processIo, runCli } from '../tools/cli/main';
import { quietKnownWarnings } from '../tools/local/quiet-warnings';

// Before any command runs: the SDK and the SQS emulator, loaded by commands, emit the known notices.
quietKnownWarnings();
void runCli(process.argv.slice(2), processIo(), COMMANDS).then((code) => {
  process.exitCode = code;
});
