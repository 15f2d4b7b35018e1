/** The three chat protocols a client can speak, and a backend may speak natively. */
export type ChatProtocol = 'chat-completions' | 'responses' | 'messages';

/**
 * The error envelope a route answers in: OpenAI's `{"error":{...}}` or Anthropic's
 * `{"type":"error","error":{...}}`. Image and video endpoints use the OpenAI one.
 */
export type ErrorShape = 'openai' | 'anthropic';
