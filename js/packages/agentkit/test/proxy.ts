// A recording proxy in front of agentd: every request is forwarded as it
// is; the bodies of POST .../chat/completions (what the model endpoint
// receives) and their answers' statuses are kept, in order.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

export type ChatMessage = { role: string; content?: unknown; tool_calls?: { id: string; function: { name: string; arguments: string } }[]; tool_call_id?: string };
export interface ChatRequest {
  body: { model: string; messages: ChatMessage[]; metadata?: Record<string, string>; user?: string };
  status: number;
  thread: string | null;
}

export interface Proxy {
  url: string;
  requests: ChatRequest[];
  close(): Promise<void>;
}

export async function recordingProxy(target: string): Promise<Proxy> {
  const requests: ChatRequest[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const headers: Record<string, string> = {};
    for (const h of ["authorization", "content-type", "x-conversation-id", "x-user-id", "idempotency-key"]) {
      const v = req.headers[h];
      if (typeof v === "string") headers[h] = v;
    }
    try {
      const r = await fetch(target + req.url, { method: req.method, headers, body: req.method === "GET" || req.method === "HEAD" ? undefined : body });
      const out = Buffer.from(await r.arrayBuffer());
      if (req.method === "POST" && req.url?.endsWith("/chat/completions")) {
        requests.push({ body: JSON.parse(body.toString("utf8")), status: r.status, thread: r.headers.get("x-convlog-thread") });
      }
      const rh: Record<string, string> = {};
      r.headers.forEach((v, k) => {
        if (!["content-encoding", "content-length", "transfer-encoding", "connection"].includes(k)) rh[k] = v;
      });
      res.writeHead(r.status, rh);
      res.end(out);
    } catch (err) {
      res.writeHead(502, { "content-type": "text/plain" });
      res.end(String(err));
    }
  });
  await new Promise<void>((res) => server.listen(0, "127.0.0.1", res));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((res) => server.close(() => res())),
  };
}

/** The messages of a request that occur more than once (as JSON). */
export function repeated(messages: ChatMessage[]): string[] {
  const seen = new Set<string>();
  const twice: string[] = [];
  for (const m of messages) {
    const k = JSON.stringify(m);
    if (seen.has(k)) twice.push(k);
    seen.add(k);
  }
  return twice;
}
