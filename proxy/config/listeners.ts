/** A tiny typed listener set; a throwing listener does not stop the others. */
export class Listeners<T> {
  private readonly set = new Set<(value: T) => void>();
  add(fn: (value: T) => void): () => void {
    this.set.add(fn);
    return () => this.set.delete(fn);
  }
  emit(value: T): void {
    for (const fn of this.set) {
      try {
        fn(value);
      } catch {
        // a listener's failure is its own; the swap has happened
      }
    }
  }
}
