/**
 * The DynamoDB Local lane's global setup (jest.dynamodb-local.config.js): stops the run at once,
 * with what to install, when the machine has no Java runtime, instead of failing every suite.
 */
import { spawnSync } from 'node:child_process';

export default function javaPresent(): void {
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (java.error !== undefined || java.status !== 0) {
    throw new Error('the DynamoDB Local lane needs `java` (a Java 17+ runtime) on the PATH; on Debian: apt-get install default-jre-headless');
  }
}
