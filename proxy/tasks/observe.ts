import type { GenAiMetrics } from '../metrics/genai.js';
import type { TaskRow } from './types.js';

/** A task reached its terminal state: its duration, and the credits it was charged or refunded. */
export function taskEnded(m: GenAiMetrics, task: TaskRow, status: string, chargedMicro: bigint | undefined): void {
  m.taskDuration.observe({ kind: task.kind, status }, Math.max(0, (Date.now() - task.createdAt.getTime()) / 1000));
  const labels = { model: task.model, group: task.group, kind: task.kind };
  if (status === 'succeeded') {
    if (chargedMicro && chargedMicro > 0n) m.creditsCharged.inc(labels, Number(chargedMicro) / 1e6);
  } else if (task.holdMicro > 0n) m.creditsRefunded.inc(labels, Number(task.holdMicro) / 1e6);
}
