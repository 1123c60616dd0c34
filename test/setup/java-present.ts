/**
 * The DynamoDB Local lane's global setup (jest.dynamodb-local.config.js): stops the run at once,
 * with what to install, when the machine has no Java runtime recent enough for DynamoDB Local 3
 * (Java 17), instead of failing every suite.
 */
import { spawnSync } from 'node:child_process';

const JAVA_MAJOR = 17;
const INSTALL = 'on Debian: apt-get install default-jre-headless';

export default function javaPresent(): void {
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (java.error !== undefined || java.status !== 0) {
    throw new Error(`the DynamoDB Local lane needs \`java\` (Java ${JAVA_MAJOR} or newer) on the PATH; ${INSTALL}`);
  }
  // `java -version` writes e.g. `openjdk version "17.0.15" 2025-04-15` (or "1.8.0_402" before Java 9) to stderr.
  const version = /version "(\d+)(?:\.(\d+))?/.exec(java.stderr);
  const major = version?.[1] === '1' ? Number(version[2]) : Number(version?.[1]);
  if (!(major >= JAVA_MAJOR)) {
    throw new Error(
      `the DynamoDB Local lane needs Java ${JAVA_MAJOR} or newer, found: ${java.stderr.split('\n')[0]}; ${INSTALL}`,
    );
  }
}
