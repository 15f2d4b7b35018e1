export { signBody, verifySignature } from './signing.js';
export { assertUrlAllowed, checkUrlSyntax, guardedLookup, refusal, refusedCause, UrlRefusedError, type UrlPolicy } from '../net/url-guard.js';
export { DEFAULT_RETRY_SCHEDULE_S, retryDelayMs } from './schedule.js';
export { enqueueDelivery, deliveriesOf, type DeliveryView } from './outbox.js';
export { createDeliveryWorker, DELIVERY_HEADER, type DeliveryWorker } from './worker.js';
export { WorkerLoop } from './loop.js';
