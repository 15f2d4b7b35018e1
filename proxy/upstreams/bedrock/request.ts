import { TranslationError, type IrPart, type IrRequest } from '../../ir/chat.js';
import { badRequest } from '../../../kernel/errors.js';
import { isObj, type Json } from '../../ir/json.js';
import { claudeThinking } from '../thinking.js';
import { instructionsWithFormat, pushTurn } from '../turns.js';

/**
 * The IR as a Bedrock Converse body (any Bedrock chat model: Claude, Llama, Nova, Mistral):
 * messages of content blocks (text, image bytes, toolUse, toolResult, reasoningContent with
 * its signature), system blocks, inferenceConfig, toolConfig. Extended thinking is asked of
 * Claude models through additionalModelRequestFields, as Bedrock documents.
 */

const FORMATS: Record<string, string> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/jpg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp' };

function image(p: Extract<IrPart, { type: 'image' }>): Json {
  let mediaType: string;
  let data: string;
  if ('data' in p) {
    mediaType = p.mediaType;
    data = p.data;
  } else {
    const m = /^data:([^;,]+);base64,(.*)$/s.exec(p.url);
    if (!m) throw badRequest('Bedrock takes images as bytes, not URLs: send the image as base64 data', 'messages');
    mediaType = m[1]!;
    data = m[2]!;
  }
  const format = FORMATS[mediaType.toLowerCase()];
  if (!format) throw badRequest(`Bedrock takes png, jpeg, gif and webp images, not ${mediaType}`, 'messages');
  return { image: { format, source: { bytes: data } } };
}

const DOCUMENTS: Record<string, string> = {
  'application/pdf': 'pdf',
  'text/csv': 'csv',
  'text/html': 'html',
  'text/plain': 'txt',
  'text/markdown': 'md',
  'application/msword': 'doc',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'application/vnd.ms-excel': 'xls',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet': 'xlsx',
};

/** What Converse cannot carry of a request: images or documents by URL (it takes bytes), formats it does not read. */
export function converseRefusal(ir: IrRequest): TranslationError | undefined {
  for (const m of ir.messages)
    for (const p of m.content) {
      if (p.type === 'image' && !('data' in p) && !p.url.startsWith('data:'))
        return new TranslationError('Bedrock takes images as bytes, not URLs: send the image as base64 data', 'messages');
      const mediaType = p.type === 'image' ? ('data' in p ? p.mediaType : /^data:([^;,]+)/.exec(p.url)?.[1]) : undefined;
      if (mediaType !== undefined && !FORMATS[mediaType.toLowerCase()])
        return new TranslationError(`Bedrock takes png, jpeg, gif and webp images, not ${mediaType}`, 'messages');
      if (p.type === 'document' && ('url' in p || !DOCUMENTS[p.mediaType.toLowerCase()]))
        return new TranslationError(`Bedrock takes documents as bytes of ${Object.values(DOCUMENTS).join(', ')}: send the document inline`, 'messages');
    }
  return undefined;
}

function argsObject(args: string): Json {
  try {
    const v = JSON.parse(args || '{}') as unknown;
    return isObj(v) ? v : { value: v };
  } catch {
    return { _raw: args };
  }
}

function block(p: IrPart): Json | undefined {
  switch (p.type) {
    case 'text':
      return p.text === '' ? undefined : { text: p.text };
    case 'image':
      return image(p);
    case 'document':
      // Bedrock names documents with letters, digits, spaces, hyphens, parentheses and brackets only.
      return 'url' in p
        ? undefined
        : {
            document: {
              format: DOCUMENTS[p.mediaType.toLowerCase()] ?? 'pdf',
              name: (p.filename ?? 'document').replace(/\.[a-z0-9]+$/i, '').replace(/[^A-Za-z0-9 ()[\]-]/g, '-') || 'document',
              source: { bytes: p.data },
            },
          };
    case 'tool_call':
      return { toolUse: { toolUseId: p.id, name: p.name, input: argsObject(p.arguments) } };
    case 'tool_result':
      return {
        // Converse refuses a blank text block: a result that is only an image (a file read) has none.
        toolResult: {
          toolUseId: p.callId,
          content: [...(p.content || !p.images?.length ? [{ text: p.content }] : []), ...(p.images ?? []).map(image)],
          ...(p.isError ? { status: 'error' } : {}),
        },
      };
    case 'reasoning':
      // Thinking goes back only with a signature (Gemini's, marked, are not Bedrock's to read).
      return p.signature && !p.signature.startsWith('gemini:') ? { reasoningContent: { reasoningText: { text: p.text, signature: p.signature } } } : undefined;
    case 'redacted_reasoning':
      return { reasoningContent: { redactedContent: p.data } };
  }
}

const CACHE_POINT = { cachePoint: { type: 'default' } };

const isClaude = (model: string) => /anthropic\.|claude/i.test(model);

export function encodeConverseRequest(ir: IrRequest, model: string, cap: number): Json {
  const messages: Json[] = [];
  for (const m of ir.messages) {
    // A breakpoint becomes a cache point after its block, as Converse takes them.
    pushTurn(
      messages,
      m.role,
      m.content.flatMap((p) => {
        const b = block(p);
        return b ? (p.cache ? [b, CACHE_POINT] : [b]) : [];
      }),
    );
  }
  const system = instructionsWithFormat(ir);
  const thinking = isClaude(model) ? claudeThinking(ir.reasoning, cap) : undefined;
  const tc = ir.toolChoice;
  const toolChoice = tc?.type === 'tool' ? { tool: { name: tc.name } } : tc?.type === 'required' ? { any: {} } : tc?.type === 'auto' ? { auto: {} } : undefined;
  const inferenceConfig: Json = {
    maxTokens: cap,
    // With thinking on, Claude takes no temperature other than 1.
    // Claude on Bedrock takes 0-1, as on Anthropic; the OpenAI protocols send up to 2.
    ...(ir.temperature !== undefined && !thinking ? { temperature: isClaude(model) ? Math.min(ir.temperature, 1) : ir.temperature } : {}),
    ...(ir.topP !== undefined && !thinking ? { topP: ir.topP } : {}),
    ...(ir.stop?.length ? { stopSequences: ir.stop } : {}),
  };
  return {
    messages,
    ...(system.length ? { system: [...system.map((text) => ({ text })), ...(ir.cacheSystem ? [CACHE_POINT] : [])] } : {}),
    inferenceConfig,
    ...(ir.tools.length
      ? {
          toolConfig: {
            tools: ir.tools.flatMap((t) => [
              { toolSpec: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), inputSchema: { json: t.parameters } } },
              ...(t.cache ? [CACHE_POINT] : []),
            ]),
            ...(toolChoice ? { toolChoice } : {}),
          },
        }
      : {}),
    ...(thinking ? { additionalModelRequestFields: { thinking } } : {}),
  };
}
