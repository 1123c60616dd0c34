/** The in-memory ledger the unit tests use passes the same contract as DynamoDbLedger on either emulator. */
import { describeLedgerContract } from '../support/ledger-contract';
import { MemoryLedger } from '../support/memory-ledger';

describeLedgerContract('MemoryLedger', 'a read after the refusal', () => {
  let between: (() => Promise<void>) | undefined;
  const ledger = new MemoryLedger({
    onRefusedClaim: async () => {
      const race = between;
      between = undefined;
      await race?.();
    },
  });
  return {
    ledger,
    onNextRefusedClaim: (race) => {
      between = race;
    },
  };
});
