/**
 * The tests' environment: jest's node environment, plus the CLI's filter of the two known process
 * warnings (tools/local/quiet-warnings.ts). It runs in the worker itself, not in a test's sandbox,
 * which is where Node prints the experimental-loader notice that loading fauxqs raises
 * (tools/local/emulators.ts): a setup file could not reach that listener.
 */
import NodeEnvironment from 'jest-environment-node';
import { quietKnownWarnings } from '../../tools/local/quiet-warnings';

quietKnownWarnings();

export default NodeEnvironment;
