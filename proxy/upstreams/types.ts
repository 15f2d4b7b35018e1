import type { IncomingHttpHeaders } from 'node:http';
import type { CompiledBackend } from '../../api/snapshot/index.js';
import type { IrRequest } from '../ir/chat.js';
import type { ChatProtocol } from '../ir/protocol.js';

export type { ChatProtocol, CompiledBackend };

/** What a chat call asks of an upstream: one of the chat protocols, or Anthropic's count_tokens. */
export type Operation = ChatProtocol | 'count-tokens';

/** One upstream provider: where its endpoints are and how it authenticates. */
export interface Provider {
  readonly name: string;
  /** Operations it can serve natively (passthrough is possible for these). */
  readonly speaks: ReadonlySet<Operation>;
  /** Path appended to the backend's baseURL (as the provider's official SDK takes it). */
  path(backend: CompiledBackend, op: Operation): string;
  /**
   * Headers for the upstream request: the provider's auth from the credential, and the client
   * headers this provider lets travel on. Common headers are added by the caller.
   */
  headers(backend: CompiledBackend, client: IncomingHttpHeaders, credential: string | undefined, out: Record<string, string>): void;
  /**
   * Auth that needs the finished request or a round trip (SigV4 over the body, an OAuth token
   * from a service account key): called last, before a translated call goes out; it may complete
   * call.path. Its errors never name the credential. `env` is the environment captured at start
   * (settings.secretFromEnv), read by a backend without a credential for its cloud's default
   * chain (AWS's, Google's Application Default Credentials).
   */
  authorize?(
    backend: CompiledBackend,
    credential: string | undefined,
    call: { path: string; headers: Record<string, string>; body: Buffer },
    env: (name: string) => string | undefined,
  ): Promise<void>;
  /**
   * count_tokens in the provider's own wire (Gemini's countTokens), for a provider that does not
   * speak Anthropic's: the call for a request (undefined: this backend cannot count), and the
   * count in its answer.
   */
  countTokens?: {
    call(backend: CompiledBackend, ir: IrRequest): { path: string; body: Record<string, unknown> } | undefined;
    count(body: unknown): number | undefined;
  };
}
