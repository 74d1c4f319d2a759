/** A Server-Sent Events client for tests: reads events from a fetch body as they come. */

export interface SseEvent { id?: string; event?: string; data: string }

export interface SseStream {
  status: number;
  /** The next event (waits for it; fails after timeoutMs). */
  next(timeoutMs?: number): Promise<SseEvent>;
  close(): void;
}

export async function openSse(url: string, headers: Record<string, string>): Promise<SseStream> {
  const controller = new AbortController();
  const res = await fetch(url, { headers, signal: controller.signal });
  const queue: SseEvent[] = [];
  const waiting: Array<(e: SseEvent) => void> = [];
  if (res.ok && res.body) {
    void (async () => {
      const decoder = new TextDecoder();
      let buf = "";
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buf += decoder.decode(chunk, { stream: true });
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const e: SseEvent = { data: "" };
            let hasData = false;
            for (const line of block.split("\n")) {
              if (line.startsWith(":")) continue;
              const [k, ...rest] = line.split(":");
              const v = rest.join(":").replace(/^ /, "");
              if (k === "id") e.id = v;
              else if (k === "event") e.event = v;
              else if (k === "data") { e.data += (hasData ? "\n" : "") + v; hasData = true; }
            }
            if (!hasData) continue;
            const w = waiting.shift();
            if (w) w(e); else queue.push(e);
          }
        }
      } catch { /* closed */ }
    })();
  }
  return {
    status: res.status,
    next(timeoutMs = 5000) {
      const e = queue.shift();
      if (e) return Promise.resolve(e);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no event within ${timeoutMs} ms`)), timeoutMs);
        waiting.push((ev) => { clearTimeout(t); resolve(ev); });
      });
    },
    close() { controller.abort(); },
  };
}
