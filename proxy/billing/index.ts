/**
 * Billing's one public face: chat reaches it through the Billing interface (holdChat -> settle),
 * tasks through the ledger operations that run inside the task's own transaction (the task's
 * state change and its money commit together), the admin API through grants, balances, usage and
 * verification. Nothing outside proxy/billing imports its other files (checked by lint).
 */
export type { Billing, ChatCharge, ChatQuote, ChatSettlement, ChatProtocol, Usage } from './types.js';
export { BillingEngine, meteredBilling } from './engine.js';
export { billingSettings, DEFAULT_BILLING_SETTINGS, type BillingSettings } from './settings.js';
export {
  accountState,
  capture,
  checkKeySpend,
  credit,
  holdForKey,
  InsufficientCreditsError,
  keySpent,
  release,
  SpendLimitError,
  verifyLedger,
  type AccountState,
  type HoldInput,
} from './ledger.js';
export { chatCost } from './pricing.js';
export { foldUsageRollups, listUsage, parseUsageQuery, recordTaskUsage, MAX_USAGE_LIMIT, type TaskUsage, type UsageQuery } from './usage.js';
