import type { IrPart, IrRequest } from '../../ir/chat.js';
import { isObj, type Json } from '../../ir/json.js';
import { fromSignature } from './signature.js';

/**
 * The IR as a Gemini generateContent body (Google AI Studio and Vertex AI take the same one):
 * contents of user and model turns with parts, systemInstruction, functionDeclarations,
 * toolConfig and generationConfig. Thought signatures Gemini gave go back on the part they came
 * with, so a multi-turn tool conversation stays valid.
 */

const BUDGET: Record<string, number> = { minimal: 512, low: 2048, medium: 8192, high: 24576 };

/** Gemini 3 refuses a model turn whose first function call lost its signature; this documented value skips the check. */
export const SKIP_SIGNATURE = 'skip_thought_signature_validator';

const MIME: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  heic: 'image/heic',
  pdf: 'application/pdf',
};

/** An image or a document (a PDF, say): inline bytes, or a file by URI. */
function imagePart(p: Extract<IrPart, { type: 'image' | 'document' }>): Json {
  if ('data' in p) return { inlineData: { mimeType: p.mediaType, data: p.data } };
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(p.url);
  if (m) return { inlineData: { mimeType: m[1], data: m[2] } };
  const ext = /\.([a-z0-9]+)(?:[?#]|$)/i.exec(p.url)?.[1]?.toLowerCase();
  const mimeType = ext ? MIME[ext] : undefined;
  return { fileData: { fileUri: p.url, ...(mimeType ? { mimeType } : {}) } };
}

function argsObject(args: string): Json {
  try {
    const v = JSON.parse(args || '{}') as unknown;
    return isObj(v) ? v : { value: v };
  } catch {
    return { _raw: args };
  }
}

/** A tool's answer as Gemini's response object: a JSON object as it is, anything else under `result` (`error` when it failed). */
function responseObject(content: string, isError: boolean | undefined): Json {
  if (!isError) {
    try {
      const v = JSON.parse(content) as unknown;
      if (isObj(v)) return v;
    } catch {
      // plain text
    }
  }
  return isError ? { error: content } : { result: content };
}

/** The parts of one model turn: signatures (carried as signature-only reasoning) join the part after them, else the part before. */
function modelParts(content: IrPart[], gemini3: boolean): Json[] {
  const out: Json[] = [];
  let pending: string | undefined;
  for (const p of content) {
    if (p.type === 'reasoning' || p.type === 'redacted_reasoning') {
      const sig = p.type === 'reasoning' ? fromSignature(p.signature) : undefined;
      // A thought summary goes back only with Gemini's own signature; the rest is not Gemini's to read.
      if (p.type === 'reasoning' && p.text !== '' && sig) out.push({ text: p.text, thought: true, thoughtSignature: sig });
      else if (sig) pending = sig;
      continue;
    }
    let part: Json | undefined;
    if (p.type === 'text') part = p.text === '' ? undefined : { text: p.text };
    else if (p.type === 'tool_call') part = { functionCall: { name: p.name, args: argsObject(p.arguments) } };
    else if (p.type === 'image') part = imagePart(p);
    if (!part) continue;
    if (pending) {
      part.thoughtSignature = pending;
      pending = undefined;
    }
    out.push(part);
  }
  if (pending) {
    const last = out.at(-1);
    if (last && last.thoughtSignature === undefined) last.thoughtSignature = pending;
  }
  if (gemini3) {
    const first = out.find((p) => p.functionCall !== undefined);
    if (first && first.thoughtSignature === undefined) first.thoughtSignature = SKIP_SIGNATURE;
  }
  return out;
}

function userParts(content: IrPart[], names: Map<string, string>): Json[] {
  const out: Json[] = [];
  for (const p of content) {
    if (p.type === 'text') {
      if (p.text !== '') out.push({ text: p.text });
    } else if (p.type === 'image' || p.type === 'document') out.push(imagePart(p));
    else if (p.type === 'tool_result') {
      // Gemini answers a call by its function's name; the id is the one the call had, when it had one.
      const name = names.get(p.callId) ?? p.callId;
      out.push({ functionResponse: { name, response: responseObject(p.content, p.isError) } });
      // The images it returned follow it in the same turn, as parts of their own.
      for (const i of p.images ?? []) out.push(imagePart(i));
    }
  }
  return out;
}

export function encodeGeminiRequest(ir: IrRequest, model: string, cap: number): Json {
  const gemini3 = /gemini-3/.test(model);
  const names = new Map<string, string>();
  for (const m of ir.messages) for (const p of m.content) if (p.type === 'tool_call') names.set(p.id, p.name);
  const contents: Json[] = [];
  for (const m of ir.messages) {
    const role = m.role === 'assistant' ? 'model' : 'user';
    const parts = role === 'model' ? modelParts(m.content, gemini3) : userParts(m.content, names);
    if (parts.length === 0) continue;
    const last = contents.at(-1);
    // Turns alternate: consecutive turns of one role are one turn (parallel tool results are one user turn).
    if (last && last.role === role) (last.parts as Json[]).push(...parts);
    else contents.push({ role, parts });
  }
  const tc = ir.toolChoice;
  const functionCallingConfig =
    tc && ir.tools.length
      ? tc.type === 'tool'
        ? { mode: 'ANY', allowedFunctionNames: [tc.name] }
        : { mode: tc.type === 'required' ? 'ANY' : tc.type === 'none' ? 'NONE' : 'AUTO' }
      : undefined;
  const budget = ir.reasoning ? (ir.reasoning.budgetTokens ?? BUDGET[ir.reasoning.effort ?? 'medium']!) : undefined;
  const rf = ir.responseFormat;
  const generationConfig: Json = {
    maxOutputTokens: cap,
    ...(ir.temperature !== undefined ? { temperature: ir.temperature } : {}),
    ...(ir.topP !== undefined ? { topP: ir.topP } : {}),
    ...(ir.stop?.length ? { stopSequences: ir.stop.slice(0, 5) } : {}),
    ...(rf ? { responseMimeType: 'application/json' } : {}),
    ...(rf?.type === 'json_schema' ? { responseJsonSchema: rf.schema } : {}),
    // maxOutputTokens covers the thoughts too: the budget stays inside the cap the hold was sized for.
    ...(budget !== undefined ? { thinkingConfig: { thinkingBudget: Math.min(budget, cap), includeThoughts: true } } : {}),
  };
  return {
    contents,
    ...(ir.system.length ? { systemInstruction: { parts: ir.system.map((text) => ({ text })) } } : {}),
    ...(ir.tools.length
      ? {
          tools: [
            {
              functionDeclarations: ir.tools.map((t) => ({
                name: t.name,
                ...(t.description !== undefined ? { description: t.description } : {}),
                parametersJsonSchema: t.parameters,
              })),
            },
          ],
        }
      : {}),
    ...(functionCallingConfig ? { toolConfig: { functionCallingConfig } } : {}),
    generationConfig,
  };
}
