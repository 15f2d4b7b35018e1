// Shared by both consoles: the token in sessionStorage (never a cookie, never a URL), JSON calls
// with it as Bearer, and small DOM helpers that build nodes (text is never parsed as HTML).

export function tokenStore(name) {
  return {
    get: () => sessionStorage.getItem(name),
    set: (v) => sessionStorage.setItem(name, v),
    clear: () => sessionStorage.removeItem(name),
  };
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export async function api(token, path, opts = {}) {
  const headers = { authorization: `Bearer ${token}`, ...(opts.headers ?? {}) };
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method: opts.method ?? 'GET', headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : {};
  } catch {
    json = { raw: text };
  }
  if (!res.ok) throw new ApiError(res.status, json?.error?.message ?? `HTTP ${res.status}`);
  return json;
}

/** el('td', {class: 'num'}, '1.5') */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k === 'text') node.textContent = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c !== undefined && c !== null) node.append(c instanceof Node ? c : String(c));
  return node;
}

/** A table with a caption, headers and rows of cells (strings, nodes or {text, class}). */
export function table(caption, headers, rows, empty = 'Nothing yet.') {
  const t = el('table', {}, el('caption', {}, caption));
  t.append(
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        headers.map((h) => el('th', { scope: 'col', class: h.num ? 'num' : undefined }, h.label ?? h)),
      ),
    ),
  );
  const body = el('tbody');
  if (rows.length === 0) body.append(el('tr', {}, el('td', { colspan: headers.length, class: 'muted' }, empty)));
  for (const r of rows)
    body.append(
      el(
        'tr',
        {},
        r.map((c, i) => el('td', { class: headers[i]?.num ? 'num' : undefined }, c instanceof Node ? c : String(c ?? '—'))),
      ),
    );
  t.append(body);
  return t;
}

export function replace(id, ...nodes) {
  const target = document.getElementById(id);
  target.replaceChildren(...nodes);
  return target;
}

/** Credits as the API gives them ("1.500000") without trailing zeros. */
export function credits(v) {
  if (v === null || v === undefined) return '—';
  const s = String(v);
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
}

export function when(iso) {
  if (!iso) return '—';
  const d = typeof iso === 'number' ? new Date(iso * 1000) : new Date(iso);
  return d.toISOString().replace('T', ' ').slice(0, 19);
}

export function showError(id, err) {
  replace(id, el('p', { class: 'error', role: 'alert' }, err instanceof Error ? err.message : String(err)));
}

/** CSV with quoting, downloaded as a file. */
export function downloadCsv(name, headers, rows) {
  const q = (v) => {
    const s = v === null || v === undefined ? '' : String(v);
    return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  const text = [headers, ...rows].map((r) => r.map(q).join(',')).join('\n') + '\n';
  const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
  const a = el('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
