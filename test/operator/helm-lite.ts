import { Buffer } from 'node:buffer';
import { stringify } from 'yaml';

/**
 * A renderer for the small subset of Helm templates charts/tollgate uses, so that a test can
 * render the chart and apply the result without a helm binary: actions with trim markers,
 * if / if not / else / end, define / include, .Values / .Release / .Chart paths, and the
 * functions toYaml, nindent, indent, quote, b64enc, required, not, or. Anything else throws: a template
 * that strays outside the subset fails the test instead of rendering wrongly.
 */

type Node = { text: string } | { expr: string } | { if: string; then: Node[]; else: Node[] } | { define: string; body: Node[] };

export interface Context {
  Values: Record<string, unknown>;
  Release: { Name: string; Namespace: string };
  Chart: { Name: string; Version: string; AppVersion: string };
}

function tokenize(src: string): ({ text: string } | { action: string })[] {
  const out: ({ text: string } | { action: string })[] = [];
  const re = /\{\{(-?)\s*([\s\S]*?)\s*(-?)\}\}/g;
  let last = 0;
  let trimNext = false;
  for (let m = re.exec(src); m; m = re.exec(src)) {
    let text = src.slice(last, m.index);
    if (trimNext) text = text.replace(/^\s+/, '');
    if (m[1] === '-') text = text.replace(/\s+$/, '');
    out.push({ text });
    out.push({ action: m[2]! });
    trimNext = m[3] === '-';
    last = re.lastIndex;
  }
  let tail = src.slice(last);
  if (trimNext) tail = tail.replace(/^\s+/, '');
  out.push({ text: tail });
  return out;
}

function parse(src: string): Node[] {
  const tokens = tokenize(src);
  let i = 0;
  const block = (): { nodes: Node[]; end: 'end' | 'else' | 'eof' } => {
    const nodes: Node[] = [];
    while (i < tokens.length) {
      const t = tokens[i++]!;
      if ('text' in t) {
        if (t.text) nodes.push({ text: t.text });
        continue;
      }
      const a = t.action;
      if (a.startsWith('/*')) continue;
      if (a === 'end') return { nodes, end: 'end' };
      if (a === 'else') return { nodes, end: 'else' };
      let m: RegExpMatchArray | null;
      if ((m = a.match(/^if\s+(.+)$/))) {
        const then = block();
        const other = then.end === 'else' ? block() : { nodes: [] };
        nodes.push({ if: m[1]!, then: then.nodes, else: other.nodes });
      } else if ((m = a.match(/^define\s+"([^"]+)"$/))) {
        nodes.push({ define: m[1]!, body: block().nodes });
      } else if (/^(range|with|template|tpl)\b/.test(a)) {
        throw new Error(`helm-lite: "${a}" is outside the supported subset`);
      } else nodes.push({ expr: a });
    }
    return { nodes, end: 'eof' };
  };
  return block().nodes;
}

function lookup(ctx: Context, path: string): unknown {
  if (path === '.') return ctx;
  if (!path.startsWith('.')) throw new Error(`helm-lite: cannot evaluate "${path}"`);
  let cur: unknown = ctx;
  for (const part of path.slice(1).split('.')) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

function words(cmd: string): string[] {
  return cmd.match(/"(?:[^"\\]|\\.)*"|\S+/g) ?? [];
}

function truthy(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0;
  if (v && typeof v === 'object') return Object.keys(v).length > 0;
  return Boolean(v);
}

export class HelmLite {
  private readonly defines = new Map<string, Node[]>();
  /** Every .Values path a template read, for the test that checks they exist. */
  readonly valuePaths = new Set<string>();

  addHelpers(src: string): void {
    for (const n of parse(src)) if ('define' in n) this.defines.set(n.define, n.body);
  }

  render(src: string, ctx: Context): string {
    return this.nodes(parse(src), ctx);
  }

  private nodes(nodes: Node[], ctx: Context): string {
    let out = '';
    for (const n of nodes) {
      if ('text' in n) out += n.text;
      else if ('expr' in n) out += this.format(this.pipeline(n.expr, ctx));
      else if ('if' in n) out += this.nodes(truthy(this.pipeline(n.if, ctx)) ? n.then : n.else, ctx);
    }
    return out;
  }

  private format(v: unknown): string {
    if (v === undefined || v === null) return '';
    return typeof v === 'object' ? JSON.stringify(v) : String(v);
  }

  private value(arg: string, ctx: Context): unknown {
    if (arg.startsWith('"')) return JSON.parse(arg) as string;
    if (/^\d+$/.test(arg)) return Number(arg);
    if (arg.startsWith('.Values.')) this.valuePaths.add(arg.slice('.Values.'.length));
    return lookup(ctx, arg);
  }

  private pipeline(expr: string, ctx: Context): unknown {
    const stages = expr.split(/\s\|\s/);
    let v = this.command(words(stages[0]!), ctx, undefined, false);
    for (const s of stages.slice(1)) v = this.command(words(s), ctx, v, true);
    return v;
  }

  private command(w: string[], ctx: Context, piped: unknown, hasPiped: boolean): unknown {
    const [fn, ...rest] = w;
    const args = rest.map((a) => this.value(a, ctx));
    if (hasPiped) args.push(piped);
    switch (fn) {
      case 'include': {
        const body = this.defines.get(args[0] as string);
        if (!body) throw new Error(`helm-lite: no template "${String(args[0])}"`);
        return this.nodes(body, args[1] as Context);
      }
      case 'toYaml':
        return stringify(args[0]).replace(/\n$/, '');
      case 'nindent':
      case 'indent': {
        const pad = ' '.repeat(args[0] as number);
        const text = String(args[1] ?? '')
          .split('\n')
          .map((l) => pad + l)
          .join('\n');
        return fn === 'nindent' ? `\n${text}` : text;
      }
      case 'quote':
        return JSON.stringify(this.format(args[0]));
      case 'b64enc':
        return Buffer.from(this.format(args[0])).toString('base64');
      case 'required':
        if (!truthy(args[1])) throw new Error(`helm-lite: required: ${String(args[0])}`);
        return args[1];
      case 'not':
        return !truthy(args[0]);
      case 'or':
        return args.find(truthy) ?? args[args.length - 1];
      default:
        if (w.length === 1 && !hasPiped) return this.value(fn!, ctx);
        throw new Error(`helm-lite: function "${fn}" is outside the supported subset`);
    }
  }
}
