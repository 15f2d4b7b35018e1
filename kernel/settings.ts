import { z } from 'zod';

/**
 * The process's settings from its environment, parsed once at start by the command that runs
 * (`tollgate serve`, `tollgate operator`) and passed down. No other module reads process.env.
 * Flags, where a command has them, override what is read here. A bad value stops the start with
 * the variable's name.
 */

type Env = Readonly<Record<string, string | undefined>>;

const present = (v: string | undefined) => (v === undefined || v === '' ? undefined : v);

/** Seconds, as milliseconds; `zero`: 0 is allowed and means what it says. */
const seconds = (name: string, zero?: string) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (present(v) === undefined) return undefined;
      const n = Number(v);
      if (!Number.isFinite(n) || n < 0 || (n === 0 && !zero)) {
        const what = zero ? `a number of seconds (0: ${zero})` : 'a positive number of seconds';
        ctx.addIssue({ code: 'custom', message: `${name} must be ${what}, got "${v}"` });
        return z.NEVER;
      }
      return n * 1000;
    });

/** Milliseconds, 0 or more. */
const millis = (name: string) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (present(v) === undefined) return undefined;
      const n = Number(v);
      if (!Number.isFinite(n) || n < 0) {
        ctx.addIssue({ code: 'custom', message: `${name} must be a number of milliseconds (0 or more), got "${v}"` });
        return z.NEVER;
      }
      return n;
    });

const positiveInt = (name: string) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (present(v) === undefined) return undefined;
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) {
        ctx.addIssue({ code: 'custom', message: `${name} must be a positive integer, got "${v}"` });
        return z.NEVER;
      }
      return n;
    });

const secondsList = (name: string) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (present(v) === undefined) return undefined;
      const list = v!.split(',').map((s) => Number(s.trim()));
      if (list.some((n) => !Number.isFinite(n) || n <= 0)) {
        ctx.addIssue({ code: 'custom', message: `${name} must be comma-separated positive seconds, got "${v}"` });
        return z.NEVER;
      }
      return list;
    });

const text = z
  .string()
  .optional()
  .transform((v) => present(v));

const flag = z
  .string()
  .optional()
  .transform((v) => v === 'true' || v === '1');

/** A flag that, unset, leaves the default (or a later layer) alone. */
const optionalFlag = z
  .string()
  .optional()
  .transform((v) => (present(v) === undefined ? undefined : v === 'true' || v === '1'));

const EnvSchema = z.object({
  TOLLGATE_LOG_LEVEL: z
    .string()
    .optional()
    .transform((v) => present(v) ?? 'info')
    .pipe(z.enum(['info', 'warn', 'error', 'silent'], { message: 'TOLLGATE_LOG_LEVEL must be info, warn, error or silent' })),
  TOLLGATE_HTTP_FRONT: z
    .string()
    .optional()
    .transform((v) => present(v) ?? 'lean')
    .pipe(z.enum(['node', 'lean'], { message: 'TOLLGATE_HTTP_FRONT must be node or lean' })),
  TOLLGATE_ADMIN_TOKEN: text,
  TOLLGATE_DISCOVERY_TOKEN: text,
  DATABASE_URL: text,
  REDIS_URL: text,
  POD_NAME: text,
  POD_NAMESPACE: text,

  TOLLGATE_BILLING_LEASE_SECONDS: seconds('TOLLGATE_BILLING_LEASE_SECONDS'),
  TOLLGATE_BILLING_IDLE_SECONDS: seconds('TOLLGATE_BILLING_IDLE_SECONDS'),
  TOLLGATE_BILLING_SWEEP_SECONDS: seconds('TOLLGATE_BILLING_SWEEP_SECONDS'),
  TOLLGATE_BILLING_COMMIT_LINGER_MS: millis('TOLLGATE_BILLING_COMMIT_LINGER_MS'),
  TOLLGATE_BILLING_JOURNAL_DIR: text,
  TOLLGATE_BILLING_JOURNAL_TABLE: optionalFlag,
  TOLLGATE_BILLING_JOURNAL_FLUSH_MS: millis('TOLLGATE_BILLING_JOURNAL_FLUSH_MS'),
  TOLLGATE_DATA_SNAPSHOT_SECONDS: seconds('TOLLGATE_DATA_SNAPSHOT_SECONDS', 'never'),

  TOLLGATE_TASK_LEASE_SECONDS: seconds('TOLLGATE_TASK_LEASE_SECONDS'),
  TOLLGATE_TASK_POLL_SECONDS: seconds('TOLLGATE_TASK_POLL_SECONDS'),
  TOLLGATE_TASK_RETRY_SECONDS: seconds('TOLLGATE_TASK_RETRY_SECONDS'),
  TOLLGATE_IMAGE_TASK_TIMEOUT_SECONDS: seconds('TOLLGATE_IMAGE_TASK_TIMEOUT_SECONDS'),
  TOLLGATE_VIDEO_TASK_TIMEOUT_SECONDS: seconds('TOLLGATE_VIDEO_TASK_TIMEOUT_SECONDS'),
  TOLLGATE_RESULT_URL_TTL_SECONDS: seconds('TOLLGATE_RESULT_URL_TTL_SECONDS'),
  TOLLGATE_WEBHOOK_TIMEOUT_SECONDS: seconds('TOLLGATE_WEBHOOK_TIMEOUT_SECONDS'),
  TOLLGATE_WEBHOOK_RETRY_SCHEDULE: secondsList('TOLLGATE_WEBHOOK_RETRY_SCHEDULE'),
  TOLLGATE_TASK_CONCURRENCY: positiveInt('TOLLGATE_TASK_CONCURRENCY'),
  TOLLGATE_TASK_RETRY_ATTEMPTS: positiveInt('TOLLGATE_TASK_RETRY_ATTEMPTS'),

  TOLLGATE_MAX_CHOICES: positiveInt('TOLLGATE_MAX_CHOICES'),
  TOLLGATE_RESPONSES_TTL_HOURS: positiveInt('TOLLGATE_RESPONSES_TTL_HOURS'),
  TOLLGATE_BODY_TIMEOUT_SECONDS: seconds('TOLLGATE_BODY_TIMEOUT_SECONDS'),

  TOLLGATE_S3_BUCKET: text,
  TOLLGATE_S3_REGION: text,
  TOLLGATE_S3_ENDPOINT: text,
  TOLLGATE_S3_PREFIX: text,
  TOLLGATE_S3_FORCE_PATH_STYLE: flag,

  TOLLGATE_LEDGER_CHECK_SECONDS: seconds('TOLLGATE_LEDGER_CHECK_SECONDS'),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: text,
  OTEL_EXPORTER_OTLP_ENDPOINT: text,
  OTEL_SERVICE_NAME: text,
  OTEL_BSP_SCHEDULE_DELAY: millis('OTEL_BSP_SCHEDULE_DELAY'),
});

/** Only what is set: each consumer fills the rest from its own defaults. */
const defined = <T extends object>(o: T): Partial<T> => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

function fromEnv(e: z.infer<typeof EnvSchema>, env: Env) {
  return {
    logLevel: e.TOLLGATE_LOG_LEVEL,
    /** Who reads the API port's connections: node:http alone, or the lean front first for the chat endpoints (proxy/front/lean.ts). */
    httpFront: e.TOLLGATE_HTTP_FRONT,
    adminToken: e.TOLLGATE_ADMIN_TOKEN,
    discoveryToken: e.TOLLGATE_DISCOVERY_TOKEN,
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    podName: e.POD_NAME,
    podNamespace: e.POD_NAMESPACE,
    /** How long a whole request body may take to arrive before the answer is 408. */
    bodyTimeoutMs: e.TOLLGATE_BODY_TIMEOUT_SECONDS,
    chat: {
      /** Most answers one chat request may ask for (`n`): each is held for the whole output cap. */
      maxChoices: e.TOLLGATE_MAX_CHOICES ?? 8,
      /** How long a translated Responses answer is kept for previous_response_id (OpenAI keeps its own 30 days). */
      storedResponsesTtlMs: (e.TOLLGATE_RESPONSES_TTL_HOURS ?? 720) * 3_600_000,
    },
    billing: defined({
      leaseMs: e.TOLLGATE_BILLING_LEASE_SECONDS,
      idleMs: e.TOLLGATE_BILLING_IDLE_SECONDS,
      sweepIntervalMs: e.TOLLGATE_BILLING_SWEEP_SECONDS,
      commitLingerMs: e.TOLLGATE_BILLING_COMMIT_LINGER_MS,
      journalDir: e.TOLLGATE_BILLING_JOURNAL_DIR,
      journalTable: e.TOLLGATE_BILLING_JOURNAL_TABLE,
      journalFlushMs: e.TOLLGATE_BILLING_JOURNAL_FLUSH_MS,
    }),
    /** PGlite on a data folder: how often a durable copy of it is made while it is written (proxy/store/durable.ts). */
    dataSnapshotMs: e.TOLLGATE_DATA_SNAPSHOT_SECONDS,
    tasks: defined({
      leaseMs: e.TOLLGATE_TASK_LEASE_SECONDS,
      pollIntervalMs: e.TOLLGATE_TASK_POLL_SECONDS,
      submitBackoffBaseMs: e.TOLLGATE_TASK_RETRY_SECONDS,
      imageDeadlineMs: e.TOLLGATE_IMAGE_TASK_TIMEOUT_SECONDS,
      videoDeadlineMs: e.TOLLGATE_VIDEO_TASK_TIMEOUT_SECONDS,
      resultUrlTtlSeconds: e.TOLLGATE_RESULT_URL_TTL_SECONDS === undefined ? undefined : Math.round(e.TOLLGATE_RESULT_URL_TTL_SECONDS / 1000),
      webhookTimeoutMs: e.TOLLGATE_WEBHOOK_TIMEOUT_SECONDS,
      webhookRetryScheduleS: e.TOLLGATE_WEBHOOK_RETRY_SCHEDULE,
      concurrency: e.TOLLGATE_TASK_CONCURRENCY,
      upstreamMaxAttempts: e.TOLLGATE_TASK_RETRY_ATTEMPTS,
    }),
    s3: e.TOLLGATE_S3_BUCKET
      ? {
          bucket: e.TOLLGATE_S3_BUCKET,
          ...defined({ region: e.TOLLGATE_S3_REGION, endpoint: e.TOLLGATE_S3_ENDPOINT, prefix: e.TOLLGATE_S3_PREFIX }),
          ...(e.TOLLGATE_S3_FORCE_PATH_STYLE ? { forcePathStyle: true } : {}),
        }
      : undefined,
    observability: {
      /** How often each proxy checks that balances and holds equal their ledger rows (tollgate_ledger_inconsistencies). */
      ledgerCheckMs: e.TOLLGATE_LEDGER_CHECK_SECONDS ?? 600_000,
      /**
       * Where spans are sent (OTLP over HTTP, e.g. http://collector:4318/v1/traces); tracing is off
       * when neither variable is set. OTEL_EXPORTER_OTLP_ENDPOINT is the collector's base URL.
       */
      otlpTracesEndpoint:
        e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (e.OTEL_EXPORTER_OTLP_ENDPOINT ? `${e.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces` : undefined),
      serviceName: e.OTEL_SERVICE_NAME ?? 'tollgate',
      /** How long finished spans wait to be sent in one batch (ms). */
      traceBatchMs: e.OTEL_BSP_SCHEDULE_DELAY ?? 2000,
    },
    /**
     * Upstream credentials given as `{env: NAME}` in a ModelRoute: looked up by name in the
     * environment captured at start (never logged).
     */
    secretFromEnv: (name: string): string | undefined => present(env[name]),
  };
}

export type Settings = ReturnType<typeof fromEnv>;

/** Thrown for a bad environment: its message names every variable that is wrong. */
export class SettingsError extends Error {
  override name = 'SettingsError';
}

export function readSettings(env: Env): Settings {
  const r = EnvSchema.safeParse(env);
  if (!r.success) throw new SettingsError(r.error.issues.map((i) => i.message).join('; '));
  return fromEnv(r.data, { ...env });
}
