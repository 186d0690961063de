/**
 * @convlog/client for Node: the same API as the package's core, whose
 * {@link ConvlogClient} sends its requests with {@link nodeFetch} (Node's
 * own `http`/`https` modules) unless given a `fetch`. Node resolves
 * `@convlog/client` to this module (the package's `node` export
 * condition); browsers, Deno and Bun get the core, which uses the global
 * `fetch`. `@convlog/client/node` names this module explicitly.
 *
 * Why: Node's global `fetch` (undici's WHATWG implementation) spends
 * several times the CPU of an `http.request` on each request, which a
 * process making many small requests (a LangGraph checkpointer, an agent
 * appending turns) pays on its one event-loop thread.
 *
 * @packageDocumentation
 */
import http from "node:http";
import https from "node:https";
import { Readable } from "node:stream";
import { ConvlogClient as CoreClient, type ConvlogClientOptions } from "./index.js";

export * from "./index.js";

/**
 * {@link ConvlogClient} of the core with {@link nodeFetch} as its default
 * `fetch` (`opts.fetch` still wins). Safe to share, as the core's.
 */
export class ConvlogClient extends CoreClient {
  constructor(opts: ConvlogClientOptions) {
    super({ ...opts, fetch: opts.fetch ?? nodeFetch });
  }
}

/**
 * A `fetch` for Node over `http.request` / `https.request` on Node's
 * global keep-alive agents (`http.globalAgent`, `https.globalAgent`, so
 * their settings apply), for the requests a convlog client makes:
 *
 * - `input` a URL string, `URL` or `Request`; `init` the Fetch standard's
 *   `method`, `headers`, `body` (string, `ArrayBuffer`, a typed array,
 *   `Blob`, `URLSearchParams`, `FormData` or a `ReadableStream`: read
 *   whole before sending, so `Content-Length` is always set) and
 *   `signal`; other `init` members are ignored.
 * - The answer is a standard `Response` whose body streams (SSE works);
 *   `Response.url` is empty and redirects are not followed (a 3xx is
 *   returned as it is; convlog's API sends none). No `Accept-Encoding`
 *   is sent, so bodies arrive uncompressed.
 * - A request that gets no answer (connection refused, reset or closed)
 *   rejects with a `TypeError` whose `cause` is Node's error, as `fetch`
 *   does; an aborted `signal` rejects with its reason (an `AbortError`
 *   `DOMException` by default) and ends a body being read with it.
 *
 * Concurrency: any number of calls at once (the agents pool sockets).
 */
export const nodeFetch: typeof fetch = async (input, init) => {
  const req = input instanceof Request ? input : undefined;
  const url = new URL(req ? req.url : input instanceof URL ? input.href : String(input));
  const method = (init?.method ?? req?.method ?? "GET").toUpperCase();
  const signal = init?.signal ?? req?.signal ?? undefined;
  signal?.throwIfAborted();
  const headers = headerRecord(init?.headers ?? req?.headers);
  const body = await bodyBytes(init?.body !== undefined ? init.body : req?.body ? await req.arrayBuffer() : undefined, headers);
  if (body !== undefined) headers["content-length"] = String(body.byteLength);
  else if (method !== "GET" && method !== "HEAD") headers["content-length"] = "0";
  signal?.throwIfAborted();
  const mod = url.protocol === "https:" ? https : url.protocol === "http:" ? http : undefined;
  if (!mod) throw new TypeError(`nodeFetch: unsupported URL scheme ${JSON.stringify(url.protocol)} in ${url.href}`);
  return new Promise<Response>((resolve, reject) => {
    const creq = mod.request(url, { method, headers, agent: mod === https ? https.globalAgent : http.globalAgent });
    let answered = false;
    const onAbort = () => creq.destroy(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    const done = () => signal?.removeEventListener("abort", onAbort);
    creq.on("error", (err) => {
      done();
      if (answered) return; // the body stream reports it
      reject(signal?.aborted ? signal.reason : new TypeError("fetch failed", { cause: err }));
    });
    creq.on("response", (res) => {
      answered = true;
      res.on("close", done);
      const h = new Headers();
      for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) h.append(res.rawHeaders[i], res.rawHeaders[i + 1]);
      const status = res.statusCode ?? 0;
      const empty = method === "HEAD" || status === 204 || status === 205 || status === 304;
      const answer = (body: BodyInit | null) => {
        try {
          resolve(new Response(body, { status, statusText: res.statusMessage, headers: h }));
        } catch (err) {
          res.destroy();
          reject(new TypeError(`fetch failed: an answer of status ${status}`, { cause: err }));
        }
      };
      if (method === "HEAD" || status === 204 || status === 205 || status === 304) {
        res.resume();
        done();
        answer(null);
        return;
      }
      const length = Number(res.headers["content-length"] ?? NaN);
      if (!(length <= BUFFERED_BYTES)) {
        answer(Readable.toWeb(res) as ReadableStream<Uint8Array>);
        return;
      }
      // A short body of known length is read whole first: a byte body
      // costs the Response far less than a stream does.
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => { const b = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks); answer(new Uint8Array(b.buffer, b.byteOffset, b.byteLength) as Uint8Array<ArrayBuffer>); });
      const failed = (err?: Error) => reject(signal?.aborted ? signal.reason : new TypeError("fetch failed: the answer was cut short", { cause: err }));
      res.on("error", failed);
      res.on("close", () => {
        if (!res.complete) failed();
      });
    });
    creq.end(body === undefined ? undefined : Buffer.from(body.buffer, body.byteOffset, body.byteLength));
  });
};

/** Answers of at most this many bytes (by `Content-Length`) are read whole before the `Response` is made; longer or unsized ones stream. */
const BUFFERED_BYTES = 1 << 20;

/** The request headers as a record of lower-case names (fetch's `HeadersInit` in any of its forms). */
function headerRecord(h: HeadersInit | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (h === undefined) return out;
  if (h instanceof Headers || Array.isArray(h)) {
    for (const [k, v] of h instanceof Headers ? h : new Headers(h)) out[k] = v;
    return out;
  }
  for (const [k, v] of Object.entries(h)) {
    const name = k.toLowerCase();
    out[name] = name in out ? `${out[name]}, ${v}` : v;
  }
  return out;
}

/**
 * A request body as bytes; sets `content-type` in `headers` as fetch
 * would for a body that implies one, when the caller gave none.
 */
async function bodyBytes(b: BodyInit | null | undefined, headers: Record<string, string>): Promise<Uint8Array | undefined> {
  if (b === undefined || b === null) return undefined;
  if (typeof b === "string") {
    headers["content-type"] ??= "text/plain;charset=UTF-8";
    return Buffer.from(b);
  }
  if (b instanceof ArrayBuffer) return new Uint8Array(b);
  if (ArrayBuffer.isView(b)) return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  // Blob, URLSearchParams, FormData, ReadableStream: as fetch encodes them.
  const r = new Response(b);
  const type = r.headers.get("content-type");
  if (type !== null) headers["content-type"] ??= type;
  return new Uint8Array(await r.arrayBuffer());
}
