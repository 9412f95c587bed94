/**
 * Loads of immutable objects by key (their name says what they hold), the least recently used
 * dropped past a bound. A load that fails is dropped too, so the next call tries again.
 */
export class LoadCache<T> {
  private loads = new Map<string, Promise<T>>();

  constructor(private readonly max: number) {}

  get(key: string, load: () => Promise<T>): Promise<T> {
    let p = this.loads.get(key);
    if (p) this.loads.delete(key);
    else {
      const made = load();
      made.catch(() => this.loads.get(key) === made && this.loads.delete(key));
      p = made;
    }
    this.loads.set(key, p);
    for (const old of this.loads.keys()) {
      if (this.loads.size <= this.max) break;
      this.loads.delete(old);
    }
    return p;
  }

  clear(): void {
    this.loads = new Map();
  }
}
