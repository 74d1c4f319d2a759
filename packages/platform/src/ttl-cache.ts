/** A small TTL cache with a size bound (oldest entries go first). */

interface Cached<T> { value: T; expiresAt: number }

export class TtlCache<T> {
  private map = new Map<string, Cached<T>>();
  constructor(private ttlMs: number, private max = 10000) {}
  get(key: string, now = Date.now()): T | undefined {
    const hit = this.map.get(key);
    if (!hit) return undefined;
    if (hit.expiresAt <= now) { this.map.delete(key); return undefined; }
    return hit.value;
  }
  set(key: string, value: T, ttlMs = this.ttlMs, now = Date.now()): void {
    if (ttlMs <= 0) return;
    if (this.map.size >= this.max && !this.map.has(key)) {
      const first = this.map.keys().next().value;
      if (first !== undefined) this.map.delete(first);
    }
    this.map.set(key, { value, expiresAt: now + ttlMs });
  }
  delete(key: string): void { this.map.delete(key); }
  clear(): void { this.map.clear(); }
}
