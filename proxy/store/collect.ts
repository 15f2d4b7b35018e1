import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let gc: (() => void) | undefined;

/** One full garbage collection of this thread's heap, without --expose-gc on the command line. */
export function collectGarbage(): void {
  if (!gc) {
    // --expose-gc, set now, applies to contexts created from now on: a new one hands out gc().
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as () => void;
  }
  gc();
}
