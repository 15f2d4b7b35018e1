import { describe, expect, it } from 'vitest';
import { meteredBilling } from '../../proxy/billing/engine.js';
import { credit } from '../../proxy/billing/ledger.js';
import { toPrices } from '../../proxy/config/runtime.js';
import { createLogger } from '../../kernel/log.js';
import { disposeStore, storeCases } from '../../test/support/stores.js';
import { booksProblem, readBooks, type Books } from './books.js';

const GRANT = 1_000_000n;
// One micro-credit a token in, two out.
const prices = toPrices({ inputPerMillion: '1000000', outputPerMillion: '2000000' });
const usage = { inputTokens: 10, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 5, reasoningTokens: 0 };

// The bench's verdict on a metered gateway's books, on the books the real engine leaves.
describe.each(storeCases())('the bench books check, $name', (sc) => {
  it('finds the books exact while a lease is out and after it is handed back, and not once a balance is changed behind the ledger', async () => {
    const store = await sc.open();
    try {
      await store.tx((q) => credit(q, { account: 'bench', operationId: 'bench-grant', amount: GRANT }));
      const engine = meteredBilling({ store, log: createLogger({}, 'error') });
      for (let i = 0; i < 3; i++) {
        const charge = await engine.holdChat({
          requestId: `r${i}`,
          keyHash: 'h',
          keyName: 'k',
          account: 'bench',
          group: 'g',
          model: 'm',
          protocol: 'chat-completions',
          prices,
          estimatedInputTokens: 10,
          maxOutputTokens: 100,
        });
        await charge.settle({ usage, usageSource: 'reported', status: 'ok', httpStatus: 200, upstreamModel: 'm', latencyMs: 1 });
      }
      await engine.booksCurrent();
      const live = await readBooks(store, 'bench', GRANT);
      expect(live).toMatchObject({ records: 3, usage: '60', balance: String(GRANT - 60n), exact: true, violations: 0 });
      // The replica's lease is still out: held, fine while it serves, not once it has shut down.
      expect(BigInt(live.held)).toBeGreaterThan(0n);
      expect(booksProblem(live, { least: 3, most: 3 }, false)).toBe('');
      expect(booksProblem(live, { least: 3, most: 3 }, true)).toMatch(/still held after shutdown/);

      await engine.close();
      const after = await readBooks(store, 'bench', GRANT);
      expect(after).toMatchObject({ records: 3, held: '0', exact: true, violations: 0 });
      expect(booksProblem(after, { least: 3, most: 3 }, true)).toBe('');

      await store.query("UPDATE accounts SET balance = balance + 1 WHERE account = 'bench'");
      const tampered = await readBooks(store, 'bench', GRANT);
      expect(tampered.exact).toBe(false);
      expect(tampered.violations).toBe(1);
      expect(booksProblem(tampered, { least: 3, most: 3 }, true)).toMatch(/is not the grant less usage.*1 ledger violations/);
    } finally {
      await disposeStore(store);
    }
  });
});

describe('booksProblem', () => {
  const exact: Books = { records: 10, usage: '100', balance: '900', held: '0', exact: true, violations: 0 };

  it('names an answer that was not charged, and a charge for a request never sent', () => {
    expect(booksProblem(exact, { least: 10, most: 60 }, false)).toBe('');
    expect(booksProblem(exact, { least: 11, most: 60 }, false)).toBe('10 requests charged for 11 answers');
    expect(booksProblem(exact, { least: 5, most: 9 }, false)).toBe('10 requests charged, more than the 9 sent');
  });
});
