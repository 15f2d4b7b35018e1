// The operator's console on the admin port: accounts and grants, usage across everything,
// ledger verification, keys (standalone: created and revoked here), config, backends, queues.
import { api, ApiError, credits, downloadCsv, el, replace, showError, table, tokenStore, when } from './common.js';
import { seriesOf, stackedBars } from './chart.js';

const token = tokenStore('tollgate.adminToken');
const $ = (id) => document.getElementById(id);
const call = (path, opts) => api(token.get(), path, opts);
let lastSummary;
let lastRecords;

async function loadAccounts() {
  const r = await call('/admin/v1/accounts?limit=200');
  const rows = r.data.map((a) => [el('code', {}, a.account), credits(a.balance), credits(a.held), credits(a.available), when(a.updated_at)]);
  const t = table(
    'Accounts (first 200)',
    ['account', { label: 'balance', num: true }, { label: 'held', num: true }, { label: 'available', num: true }, 'updated (UTC)'],
    rows,
    'No accounts yet: an account exists once it is granted credits.',
  );
  t.id = 'accounts-table';
  replace('accounts-body', t);
}

async function grant(ev) {
  ev.preventDefault();
  const account = $('grant-account').value.trim();
  const body = { credits: $('grant-credits').value.trim(), idempotency_key: $('grant-idem').value.trim() };
  if ($('grant-note').value.trim()) body.note = $('grant-note').value.trim();
  try {
    const r = await call(`/admin/v1/accounts/${encodeURIComponent(account)}/grants`, { method: 'POST', body });
    // A new idempotency key for the next grant; resending this form as it was would not grant twice.
    $('grant-idem').value = crypto.randomUUID();
    // The table first: when the status appears, the table already shows the balance it names
    // (a failed reload leaves the old table; the grant itself is done, and the status says so).
    await loadAccounts().catch(() => {});
    replace(
      'grant-result',
      el(
        'p',
        { class: 'ok', role: 'status' },
        `Granted ${credits(body.credits)} credits to ${r.account}: balance ${credits(r.balance)}, available ${credits(r.available)}.`,
      ),
    );
  } catch (err) {
    showError('grant-result', err);
  }
}

function usageQuery() {
  const q = new URLSearchParams();
  for (const [id, name] of [
    ['usage-account', 'account'],
    ['usage-key', 'key'],
    ['usage-model', 'model'],
  ]) {
    const v = $(id).value.trim();
    if (v) q.set(name, v);
  }
  for (const [id, name] of [
    ['usage-since', 'since'],
    ['usage-until', 'until'],
  ]) {
    const v = $(id).value;
    if (v) q.set(name, `${v}:00Z`);
  }
  return q;
}

async function loadUsage() {
  const q = usageQuery();
  const bucket = $('usage-bucket').value;
  const groupBy = $('usage-group').value;
  const measure = $('usage-measure').value;
  const sq = new URLSearchParams(q);
  sq.set('bucket', bucket);
  sq.set('group_by', groupBy);
  const s = (lastSummary = await call(`/admin/v1/usage/summary?${sq}`));
  const rows = s.data.map((r) => ({ ...r, tokens: r.input_tokens + r.output_tokens }));
  const { buckets, series } = seriesOf(rows, groupBy === 'none' ? '_' : groupBy, measure, { since: s.since, until: s.until, bucket });
  const fmt = measure === 'credits' ? (v) => credits(Number(v).toFixed(6)) : (v) => String(Math.round(v));
  const bucketLabel = (b) => (bucket === 'hour' ? b.slice(5, 16).replace('T', ' ') : b.slice(0, 10));
  replace(
    'usage-body',
    el(
      'p',
      { id: 'usage-totals' },
      `${when(s.since)} to ${when(s.until)} UTC: ${s.totals.requests} requests (${s.totals.errors} not ok), ${s.totals.input_tokens} input and ${s.totals.output_tokens} output tokens, ${credits(s.totals.credits)} credits.`,
    ),
    rows.length
      ? stackedBars({ buckets, series, label: `${measure} by ${groupBy} per ${bucket}`, format: fmt, bucketLabel })
      : el('p', { class: 'muted' }, 'No usage in this range.'),
  );
  const rq = new URLSearchParams(q);
  rq.set('limit', '100');
  lastRecords = await call(`/admin/v1/usage?${rq}`);
  replace(
    'records-body',
    table(
      'Latest 100 usage records matching the filters (UTC)',
      [
        'time',
        'account',
        'key',
        'model',
        { label: 'in', num: true },
        { label: 'out', num: true },
        { label: 'credits', num: true },
        'status',
        { label: 'ms', num: true },
        'usage',
      ],
      lastRecords.data.map((r) => [
        when(r.created_at),
        r.account,
        r.key,
        r.model,
        r.input_tokens,
        r.output_tokens,
        credits(r.credits),
        r.status,
        r.latency_ms,
        r.usage,
      ]),
      'No records.',
    ),
  );
}

function csvSummary() {
  if (!lastSummary) return;
  const g = lastSummary.group_by;
  downloadCsv(
    'tollgate-usage-summary.csv',
    ['start', g, 'requests', 'errors', 'input_tokens', 'cached_input_tokens', 'output_tokens', 'credits'],
    lastSummary.data.map((r) => [r.start, r[g] ?? '', r.requests, r.errors, r.input_tokens, r.cached_input_tokens, r.output_tokens, r.credits]),
  );
}

function csvRecords() {
  if (!lastRecords?.data.length) return;
  const cols = Object.keys(lastRecords.data[0]);
  downloadCsv(
    'tollgate-usage-records.csv',
    cols,
    lastRecords.data.map((r) => cols.map((c) => r[c])),
  );
}

async function verify() {
  replace('ledger-body', el('p', {}, 'Verifying…'));
  try {
    const r = await call('/admin/v1/ledger/verify');
    replace(
      'ledger-body',
      r.consistent
        ? el('p', { class: 'ok', role: 'status', id: 'ledger-result' }, 'Consistent: every balance and held amount equals the sum of its ledger rows.')
        : el(
            'div',
            {},
            el('p', { class: 'error', role: 'alert', id: 'ledger-result' }, `${r.violations.length} violation(s)`),
            el('pre', {}, JSON.stringify(r.violations, null, 2)),
          ),
    );
  } catch (err) {
    showError('ledger-body', err);
  }
}

async function loadKeys(groups) {
  const r = await call('/admin/v1/keys');
  if (r.mode === 'cluster') {
    replace(
      'keys-create',
      el('p', {}, 'In a cluster, keys are ApiKey resources: this list is read-only. Create and revoke keys with kubectl:'),
      el('pre', {}, r.kubectl.create),
      el('pre', {}, r.kubectl.revoke),
    );
    replace(
      'keys-body',
      table(
        'Keys in service',
        ['name', 'group', 'account'],
        r.data.map((k) => [el('code', {}, k.name), k.group, k.account]),
      ),
    );
    return;
  }
  if (!$('key-form')) {
    const form = el(
      'form',
      { id: 'key-form', class: 'inline', 'aria-labelledby': 'key-form-title' },
      el('h3', { id: 'key-form-title', class: 'wide' }, 'Create a key'),
      el('label', {}, 'Name (optional)', el('input', { id: 'key-name', name: 'name', pattern: '[a-z0-9]([-a-z0-9.]*[a-z0-9])?' })),
      el('label', {}, 'Group', el('select', { id: 'key-group', name: 'group', required: true })),
      el('label', {}, 'Account', el('input', { id: 'key-account', name: 'account', required: true })),
      el('label', {}, 'Spend limit (credits, optional)', el('input', { id: 'key-limit', name: 'spend_limit', inputmode: 'decimal' })),
      el('label', {}, 'Expires at (optional, RFC 3339)', el('input', { id: 'key-expires', name: 'expires_at', placeholder: '2027-01-01T00:00:00Z' })),
      el('button', { type: 'submit' }, 'Create key'),
    );
    form.addEventListener('submit', (ev) => void createKey(ev));
    replace(
      'keys-create',
      el('p', { class: 'muted' }, `Standalone: new keys are written as ApiKey manifests (hash only) to ${r.write_dir}, which the gateway watches.`),
      form,
    );
  }
  const sel = $('key-group');
  const cur = sel.value;
  sel.replaceChildren(...groups.map((g) => el('option', { value: g, selected: g === cur }, g)));
  const rows = r.data.map((k) => [
    el('code', {}, k.name),
    k.group,
    k.account,
    k.revoked ? el('span', { class: 'error' }, 'revoked') : k.in_service ? el('span', { class: 'ok' }, 'in service') : 'not in service',
    k.spend_limit === null ? '—' : credits(k.spend_limit),
    k.expires_at ?? '—',
    el('code', {}, k.file),
    k.revoked ? '—' : el('button', { type: 'button', class: 'danger', 'aria-label': `Revoke key ${k.name}`, onclick: () => void revokeKey(k.name) }, 'Revoke'),
  ]);
  const t = table(
    'Keys (ApiKey manifests in the config folders)',
    ['name', 'group', 'account', 'state', { label: 'spend limit', num: true }, 'expires', 'file', 'action'],
    rows,
  );
  t.id = 'keys-table';
  replace('keys-body', t);
}

async function createKey(ev) {
  ev.preventDefault();
  const body = { group: $('key-group').value, account: $('key-account').value.trim() };
  for (const [id, name] of [
    ['key-name', 'name'],
    ['key-limit', 'spend_limit'],
    ['key-expires', 'expires_at'],
  ]) {
    const v = $(id).value.trim();
    if (v) body[name] = v;
  }
  try {
    const r = await call('/admin/v1/keys', { method: 'POST', body });
    replace(
      'keys-new',
      el(
        'div',
        { role: 'status' },
        el('p', { class: 'ok' }, `Key "${r.name}" created (written to ${r.file}). It is shown once: copy it now.`),
        el('p', { class: 'secret', id: 'new-key', tabindex: '0' }, r.key),
        el('button', { type: 'button', class: 'secondary', onclick: () => void navigator.clipboard?.writeText(r.key) }, 'Copy the key'),
        el('button', { type: 'button', class: 'secondary', onclick: () => replace('keys-new') }, 'I have saved it: hide'),
      ),
    );
    $('new-key').focus();
    $('key-form').reset();
    await refreshConfig();
  } catch (err) {
    showError('keys-new', err);
  }
}

async function revokeKey(name) {
  if (!window.confirm(`Revoke key "${name}"? Clients using it get 401 as soon as the config reloads.`)) return;
  try {
    await call(`/admin/v1/keys/${encodeURIComponent(name)}/revoke`, { method: 'POST', body: {} });
    replace('keys-new', el('p', { class: 'ok', role: 'status' }, `Key "${name}" revoked.`));
    await refreshConfig();
  } catch (err) {
    showError('keys-new', err);
  }
}

async function loadConfig() {
  const c = await call('/admin/v1/config');
  replace('who', `config ${c.version.slice(0, 12)} · ${c.mode}`);
  replace(
    'config-body',
    el('p', {}, `Version `, el('code', { id: 'config-version' }, c.version), ` (${c.mode}).`),
    table(
      'Models',
      ['model', 'type', { label: 'backends', num: true }, 'defined in'],
      c.models.map((m) => [el('code', {}, m.model), m.type, m.backends, m.source]),
    ),
    table(
      'Groups',
      ['group', 'models', 'Claude Code only', { label: 'keys', num: true }],
      c.groups.map((g) => [el('code', {}, g.name), g.models.join(', '), g.cc_only ? 'yes' : 'no', g.keys]),
    ),
    table(
      'Keys in service (by name)',
      ['name', 'group', 'account'],
      c.keys.map((k) => [el('code', {}, k.name), k.group, k.account]),
    ),
    table(
      'Resources left out (or of a change refused), and why',
      ['kind', 'name', 'source', 'error'],
      c.left_out.map((e) => [e.kind, e.name, e.source ?? '—', e.message]),
      'None: every resource compiled.',
    ),
  );
  return c.groups.map((g) => g.name);
}

async function loadBackends() {
  const r = await call('/admin/v1/backends');
  replace(
    'backends-body',
    table(
      'Backends of every model (cooldowns are this replica’s)',
      ['model', 'type', 'provider', 'base URL', 'upstream model', { label: 'priority', num: true }, { label: 'weight', num: true }, 'state'],
      r.data.map((b) => [
        el('code', {}, b.model),
        b.type,
        b.provider,
        b.base_url,
        b.upstream_model,
        b.priority,
        b.weight,
        b.cooling_down ? el('span', { class: 'error' }, 'cooling down') : el('span', { class: 'ok' }, 'ready'),
      ]),
    ),
  );
}

async function loadTasks() {
  const r = await call('/admin/v1/tasks?limit=50');
  replace(
    'tasks-body',
    table(
      'Latest 50 tasks (UTC)',
      [
        'created',
        'id',
        'kind',
        'model',
        'account',
        'status',
        { label: 'attempts', num: true },
        { label: 'held', num: true },
        { label: 'charged', num: true },
        'error',
      ],
      r.data.map((t) => [
        when(t.created_at),
        el('code', {}, t.id),
        t.kind,
        t.model,
        t.account,
        t.status,
        t.attempts,
        credits(t.held),
        t.charged === null ? '—' : credits(t.charged),
        t.error ? `${t.error.code}: ${t.error.message}` : '—',
      ]),
      'No tasks.',
    ),
  );
}

async function loadWebhooks() {
  const r = await call('/admin/v1/webhooks?limit=50');
  replace(
    'webhooks-body',
    table(
      'Latest 50 webhook deliveries (UTC)',
      ['created', 'task', 'URL', 'status', { label: 'attempts', num: true }, 'next attempt', 'last error', 'attempt log'],
      r.data.map((d) => [
        when(d.created_at),
        el('code', {}, d.task_id),
        d.url,
        d.status,
        d.attempts,
        d.status === 'pending' ? when(d.next_attempt_at) : '—',
        d.last_error ?? '—',
        d.attempt_log.length ? d.attempt_log.map((a) => `#${a.attempt} ${a.status_code ?? a.error ?? '?'} (${a.duration_ms} ms)`).join('; ') : '—',
      ]),
      'No deliveries.',
    ),
  );
}

async function refreshConfig() {
  // The folder watcher reloads shortly after a manifest changes.
  await new Promise((r) => setTimeout(r, 400));
  await guarded('config-body', async () => loadKeys(await loadConfig()));
}

async function guarded(id, fn) {
  try {
    await fn();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      signOut('The admin token was refused. Sign in again.');
      throw err;
    }
    showError(id, err);
  }
}

async function refresh() {
  try {
    let groups = [];
    await guarded('config-body', async () => {
      groups = await loadConfig();
    });
    await guarded('accounts-body', loadAccounts);
    await guarded('keys-body', () => loadKeys(groups));
    await guarded('usage-body', loadUsage);
    await guarded('backends-body', loadBackends);
    await guarded('tasks-body', loadTasks);
    await guarded('webhooks-body', loadWebhooks);
    document.body.dataset.ready = 'true';
  } catch {
    /* signed out */
  }
}

function signOut(message) {
  token.clear();
  $('app').hidden = true;
  $('sign-in').hidden = false;
  $('sign-out').hidden = true;
  replace('who');
  if (message) showError('sign-in-error', message);
  else replace('sign-in-error');
  delete document.body.dataset.ready;
}

async function signIn() {
  $('sign-in').hidden = true;
  $('app').hidden = false;
  $('sign-out').hidden = false;
  $('grant-idem').value = crypto.randomUUID();
  await refresh();
}

$('sign-in-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  token.set($('admin-token').value.trim());
  $('admin-token').value = '';
  void signIn();
});
$('sign-out').addEventListener('click', () => signOut());
$('grant-form').addEventListener('submit', (ev) => void grant(ev));
$('usage-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void guarded('usage-body', loadUsage);
});
$('csv-summary').addEventListener('click', csvSummary);
$('csv-records').addEventListener('click', csvRecords);
$('verify').addEventListener('click', () => void verify());
if (token.get()) void signIn();
