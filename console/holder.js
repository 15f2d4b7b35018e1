// The key holder's console: what the key may use, at what price, what it spent, and a playground.
import { api, ApiError, credits, el, replace, showError, table, tokenStore, when } from './common.js';
import { seriesOf, stackedBars } from './chart.js';

const token = tokenStore('tollgate.apiKey');
const $ = (id) => document.getElementById(id);
let me; // /v1/credits
let catalog = [];

function priceText(m) {
  const p = m.pricing ?? {};
  if (m.type === 'image')
    return Object.entries(p.per_image ?? {})
      .map(([k, v]) => `${k}: ${credits(v)} / image`)
      .join(', ');
  if (m.type === 'video') {
    const parts = Object.entries(p.per_second ?? {}).map(([k, v]) => `${k}: ${credits(v)} / s`);
    if (p.audio_per_second && Number(p.audio_per_second) > 0) parts.push(`audio: +${credits(p.audio_per_second)} / s`);
    return parts.join(', ');
  }
  return '';
}

function capText(caps) {
  return Object.entries(caps ?? {})
    .map(([k, v]) => (v === true ? k : `${k}: ${Array.isArray(v) ? v.join('/') : v}`))
    .join(', ');
}

async function loadBalance() {
  me = await api(token.get(), '/v1/credits');
  const k = me.key;
  replace('who', `key ${k.name} · account ${me.account} · group ${k.group}${k.cc_only ? ' (Claude Code only)' : ''}`);
  const card = (label, value, id) => el('div', { class: 'card' }, el('dt', {}, label), el('dd', { id }, value));
  replace(
    'balance-body',
    el(
      'dl',
      { class: 'cards' },
      card('Balance', credits(me.balance), 'bal-balance'),
      card('Held', credits(me.held), 'bal-held'),
      card('Available', credits(me.available), 'bal-available'),
      card('Key spend limit', k.spend_limit === null ? 'none' : credits(k.spend_limit), 'bal-limit'),
      card('Key spent', credits(k.spent), 'bal-spent'),
    ),
  );
}

async function loadModels() {
  const list = await api(token.get(), '/v1/models');
  catalog = list.data;
  const rows = catalog.map((m) => {
    const p = m.pricing ?? {};
    const chat = m.type === 'chat';
    return [
      el('code', {}, m.id),
      m.type,
      chat ? credits(p.input_per_million) : '—',
      chat ? credits(p.cached_input_per_million) : '—',
      chat ? credits(p.output_per_million) : '—',
      priceText(m) || '—',
      capText(m.capabilities) || '—',
    ];
  });
  const t = table(
    'Models of your group',
    [
      'model',
      'type',
      { label: 'input / M tokens', num: true },
      { label: 'cached input / M', num: true },
      { label: 'output / M tokens', num: true },
      'image / video prices',
      'capabilities',
    ],
    rows,
  );
  t.id = 'models-table';
  replace('models-body', t);
  const select = $('play-model');
  const current = select.value;
  select.replaceChildren(...catalog.filter((m) => m.type === 'chat').map((m) => el('option', { value: m.id, selected: m.id === current }, m.id)));
}

async function loadUsage() {
  const bucket = $('usage-bucket').value;
  const measure = $('usage-measure').value;
  const s = await api(token.get(), `/v1/usage/summary?bucket=${bucket}&group_by=model`);
  const rows = s.data.map((r) => ({ ...r, tokens: r.input_tokens + r.output_tokens }));
  const { buckets, series } = seriesOf(rows, 'model', measure, { since: s.since, until: s.until, bucket });
  const label = `${measure} by model per ${bucket}, ${when(s.since)} to ${when(s.until)} UTC`;
  const fmt = measure === 'credits' ? (v) => credits(Number(v).toFixed(6)) : (v) => String(Math.round(v));
  const bucketLabel = (b) => (bucket === 'hour' ? b.slice(11, 16) : b.slice(5, 10));
  const totals = el(
    'p',
    { id: 'usage-totals' },
    `Total: ${s.totals.requests} requests, ${s.totals.input_tokens} input and ${s.totals.output_tokens} output tokens, ${credits(s.totals.credits)} credits.`,
  );
  replace(
    'usage-body',
    totals,
    rows.length ? stackedBars({ buckets, series, label, format: fmt, bucketLabel }) : el('p', { class: 'muted' }, 'No usage in this range yet.'),
  );
}

async function loadRequests() {
  const u = await api(token.get(), '/v1/usage?limit=20');
  const rows = u.data.map((r) => [
    when(r.created_at),
    el('code', {}, r.model),
    r.protocol,
    r.input_tokens,
    r.output_tokens,
    credits(r.credits),
    r.status,
    r.latency_ms,
    r.ttft_ms ?? '—',
    r.usage,
  ]);
  replace(
    'requests-body',
    table(
      'Your latest 20 requests (UTC)',
      [
        'time',
        'model',
        'kind',
        { label: 'input tokens', num: true },
        { label: 'output tokens', num: true },
        { label: 'credits', num: true },
        'status',
        { label: 'latency ms', num: true },
        { label: 'TTFT ms', num: true },
        'usage',
      ],
      rows,
      'No requests yet.',
    ),
  );
}

function preview(t) {
  if (!t.data?.length) return '—';
  return el(
    'div',
    { class: 'previews' },
    t.data.map((d, i) =>
      t.kind === 'video'
        ? el('video', { src: d.url, controls: true, preload: 'metadata', 'aria-label': `video ${i + 1} of task ${t.id}` })
        : el('a', { href: d.url }, el('img', { src: d.url, alt: `image ${i + 1} of task ${t.id}`, loading: 'lazy' })),
    ),
  );
}

async function loadTasks() {
  const r = await api(token.get(), '/v1/tasks?limit=20').catch((err) => {
    if (err instanceof ApiError && err.status === 403) return { data: null };
    throw err;
  });
  if (r.data === null) {
    replace('tasks-body', el('p', { class: 'muted' }, "This key's group is restricted to Claude Code: it makes no image or video tasks."));
    return;
  }
  const rows = r.data.map((t) => [
    when(t.created),
    el('code', {}, t.id),
    t.kind,
    el('code', {}, t.model),
    t.mode,
    el('span', { class: t.status === 'succeeded' ? 'ok' : t.status === 'failed' ? 'error' : undefined }, t.status),
    t.charged === null ? '—' : credits(t.charged),
    preview(t),
    t.error ? `${t.error.code}: ${t.error.message}` : '—',
  ]);
  replace(
    'tasks-body',
    table(
      'Your latest 20 tasks (UTC)',
      ['created', 'task', 'kind', 'model', 'mode', 'status', { label: 'charged', num: true }, 'results', 'error'],
      rows,
      'No tasks yet.',
    ),
  );
}

// The playground: one streamed call through the chosen protocol, the text shown as it arrives.
const PROTOCOLS = {
  'chat-completions': {
    path: '/v1/chat/completions',
    body: (model, text, max) => ({ model, stream: true, max_tokens: max, messages: [{ role: 'user', content: text }] }),
    delta: (_event, d) => d.choices?.[0]?.delta?.content ?? '',
  },
  responses: {
    path: '/v1/responses',
    body: (model, text, max) => ({ model, stream: true, max_output_tokens: max, input: text }),
    delta: (event, d) => (event === 'response.output_text.delta' || d.type === 'response.output_text.delta' ? (d.delta ?? '') : ''),
  },
  messages: {
    path: '/v1/messages',
    headers: { 'anthropic-version': '2023-06-01' },
    body: (model, text, max) => ({ model, stream: true, max_tokens: max, messages: [{ role: 'user', content: text }] }),
    delta: (_event, d) => (d.type === 'content_block_delta' && d.delta?.type === 'text_delta' ? d.delta.text : ''),
  },
};

async function play(ev) {
  ev.preventDefault();
  const p = PROTOCOLS[$('play-endpoint').value];
  const out = $('play-output');
  const status = $('play-status');
  const send = $('play-send');
  out.textContent = '';
  status.textContent = 'Streaming…';
  send.disabled = true;
  const started = performance.now();
  try {
    const res = await fetch(p.path, {
      method: 'POST',
      headers: { authorization: `Bearer ${token.get()}`, 'content-type': 'application/json', accept: 'text/event-stream', ...(p.headers ?? {}) },
      body: JSON.stringify(p.body($('play-model').value, $('play-message').value, Number($('play-max').value) || 64)),
    });
    if (!res.ok) {
      const j = await res.json().catch(() => ({}));
      throw new Error(`HTTP ${res.status}: ${j.error?.message ?? res.statusText}`);
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let cut;
      while ((cut = buf.indexOf('\n\n')) !== -1) {
        const frame = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let event = '';
        let data = '';
        for (const line of frame.split('\n')) {
          if (line.startsWith('event:')) event = line.slice(6).trim();
          else if (line.startsWith('data:')) data += line.slice(5).trim();
        }
        if (!data || data === '[DONE]') continue;
        try {
          out.textContent += p.delta(event, JSON.parse(data));
        } catch {
          /* a frame that is not JSON carries no text */
        }
      }
    }
    status.textContent = `Done in ${Math.round(performance.now() - started)} ms through ${p.path}.`;
    status.dataset.done = 'true';
  } catch (err) {
    status.textContent = '';
    out.append(el('span', { class: 'error', role: 'alert' }, err.message));
  } finally {
    send.disabled = false;
  }
  // The charge is committed with the stream's end: the balance and the chart move now.
  await refresh();
}

async function refresh() {
  const parts = [
    ['balance-body', loadBalance],
    ['models-body', loadModels],
    ['usage-body', loadUsage],
    ['requests-body', loadRequests],
    ['tasks-body', loadTasks],
  ];
  for (const [id, fn] of parts) {
    try {
      await fn();
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return signOut('Your key was refused (unknown, revoked or expired). Sign in again.');
      showError(id, err);
    }
  }
  const restricted = me?.key?.cc_only === true;
  $('playground').hidden = restricted;
  $('playground-link').hidden = restricted;
  document.body.dataset.ready = 'true';
}

function signOut(message) {
  token.clear();
  me = undefined;
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
  await refresh();
}

$('sign-in-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const key = $('api-key').value.trim();
  $('api-key').value = '';
  token.set(key);
  void signIn();
});
$('sign-out').addEventListener('click', () => signOut());
$('usage-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void loadUsage().catch((err) => showError('usage-body', err));
});
$('play-form').addEventListener('submit', (ev) => void play(ev));
if (token.get()) void signIn();
