/** Which DynamoDB emulator the local emulators start (tools/local/emulators.ts): the one switch of the DynamoDB Local lane. */
import { DYNAMODB_EMULATOR_ENV, DYNAMODB_EMULATORS, dynamoDbEmulatorOf } from '../../tools/local/emulators';

describe('the DynamoDB emulator asked for', () => {
  it(`is dynalite unless ${DYNAMODB_EMULATOR_ENV} names another`, () => {
    expect(dynamoDbEmulatorOf({})).toBe('dynalite');
    expect(dynamoDbEmulatorOf({ [DYNAMODB_EMULATOR_ENV]: '' })).toBe('dynalite');
    for (const emulator of DYNAMODB_EMULATORS)
      expect(dynamoDbEmulatorOf({ [DYNAMODB_EMULATOR_ENV]: emulator })).toBe(emulator);
  });

  it('refuses a name it does not know, naming the variable and the choices', () => {
    expect(() => dynamoDbEmulatorOf({ [DYNAMODB_EMULATOR_ENV]: 'localstack' })).toThrow(
      `${DYNAMODB_EMULATOR_ENV}=localstack: expected one of dynalite, dynamodb-local`,
    );
  });
});
