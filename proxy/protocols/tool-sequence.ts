import type { IrStreamPart } from '../ir/chat.js';

/**
 * Puts an upstream's tool calls one after another for protocols whose blocks are sequential
 * (Messages' content blocks, Responses' output items). Chat Completions labels every argument
 * delta with its call's index, so a server may interleave parallel calls: the second starts, then
 * the first's arguments go on. The first call to start streams as it comes; a call that starts
 * while another is open is held, with its arguments, until the open one ends (its block_end), and
 * then streams in its turn; any other part (text, the finish) sends whatever is held first. Pure.
 */
export class ToolCallSequencer {
  private open: number | undefined;
  /** Calls held back, in the order they started, each with its parts so far. */
  private readonly held = new Map<number, IrStreamPart[]>();

  push(p: IrStreamPart): IrStreamPart[] {
    switch (p.type) {
      case 'tool_call_start':
        if (this.open === undefined) {
          this.open = p.index;
          return [p];
        }
        this.held.set(p.index, [p]);
        return [];
      case 'tool_call_delta':
      case 'block_end': {
        const parts = this.held.get(p.index);
        if (parts) {
          parts.push(p);
          return [];
        }
        if (p.type === 'block_end' && p.index === this.open) return [p, ...this.promote()];
        return [p];
      }
      case 'start':
        return [p];
      default:
        // The upstream has moved past its calls: a call that starts later streams at once.
        if (!this.held.size) {
          this.open = undefined;
          return [p];
        }
        return [...this.release(), p];
    }
  }

  /** The open call ended: the first held call streams now (and the next, if that one has ended too). */
  private promote(): IrStreamPart[] {
    this.open = undefined;
    const out: IrStreamPart[] = [];
    for (const [index, parts] of this.held) {
      this.held.delete(index);
      out.push(...parts);
      if (parts.at(-1)?.type !== 'block_end') {
        this.open = index;
        break;
      }
    }
    return out;
  }

  private release(): IrStreamPart[] {
    const out = [...this.held.values()].flat();
    this.held.clear();
    this.open = undefined;
    return out;
  }
}
