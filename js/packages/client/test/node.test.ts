// The Node entry: the client suite through nodeFetch against a real agentd,
// and nodeFetch's own contract (bodies, headers, streaming, empty answers,
// lost connections, aborts) against a plain node:http server.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { ConvlogClient, ConvlogError, nodeFetch } from "../src/node.js";
import { ConvlogClient as CoreClient } from "../src/index.js";
import { clientSuite } from "./suite.js";

clientSuite(ConvlogClient);

let server: Server;
let base: string;
/** Released by the test to let the streaming route send its second chunk. */
let release: () => void = () => {};
const sockets = new Set<Socket>();

async function echo(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const body = JSON.stringify({ method: req.method, headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
  res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), "X-Multi": ["a", "b"] });
  res.end(body);
}

before(async () => {
  server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    switch (path) {
      case "/echo":
        void echo(req, res);
        return;
      case "/no-content":
        res.writeHead(204).end();
        return;
      case "/stream":
        // Chunked, no Content-Length: the first chunk must reach the
        // reader before the second is sent.
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        res.write("data: one\n\n");
        new Promise<void>((r) => (release = r)).then(() => res.end("data: two\n\n"));
        return;
      case "/big": {
        const big = Buffer.alloc(3 << 20, 7);
        res.writeHead(200, { "Content-Length": big.length });
        res.end(big);
        return;
      }
      case "/cut":
        // Promises 100 bytes, sends 10, hangs up.
        res.writeHead(200, { "Content-Length": 100 });
        res.write("0123456789", () => res.destroy());
        return;
      case "/hang-up":
        req.socket.destroy();
        return;
      case "/never":
        return; // no answer until the client gives up
    }
    res.writeHead(404).end();
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => server.close(r));
});

type Echo = { method: string; headers: Record<string, string>; body: string };

test("@convlog/client resolves to the Node entry under Node", async () => {
  const pkg = await import("@convlog/client");
  assert.equal(pkg.ConvlogClient, ConvlogClient);
  assert.ok(new ConvlogClient({ baseUrl: base }) instanceof CoreClient);
});

test("the Node entry's client does not use the global fetch; the core's does", async () => {
  const global = globalThis.fetch;
  let calls = 0;
  globalThis.fetch = async (input, init) => {
    calls++;
    return global(input, init);
  };
  try {
    // The test server answers 404 to every API route.
    const notFound = (err: unknown) => err instanceof ConvlogError && err.status === 404;
    await assert.rejects(new ConvlogClient({ baseUrl: base }).getThread("t"), notFound);
    assert.equal(calls, 0);
    await assert.rejects(new CoreClient({ baseUrl: base }).getThread("t"), notFound);
    assert.equal(calls, 1);
  } finally {
    globalThis.fetch = global;
  }
});

test("nodeFetch sends every body kind with its length and the content type fetch would give it", async () => {
  const cases: [string, RequestInit, string, string | undefined][] = [
    ["string", { body: "héllo" }, "héllo", "text/plain;charset=UTF-8"],
    ["bytes", { body: new TextEncoder().encode("bytes") }, "bytes", undefined],
    ["ArrayBuffer", { body: new TextEncoder().encode("buffer").buffer as ArrayBuffer }, "buffer", undefined],
    ["Blob", { body: new Blob(["blob"], { type: "application/x-test" }) }, "blob", "application/x-test"],
    ["URLSearchParams", { body: new URLSearchParams({ a: "1", b: "x y" }) }, "a=1&b=x+y", "application/x-www-form-urlencoded;charset=UTF-8"],
    ["stream", { body: new Blob(["streamed"]).stream(), duplex: "half" } as RequestInit, "streamed", undefined],
    ["explicit type wins", { body: "{}", headers: { "Content-Type": "application/json" } }, "{}", "application/json"],
  ];
  for (const [name, init, body, type] of cases) {
    const res = await nodeFetch(`${base}/echo`, { method: "POST", ...init });
    assert.equal(res.status, 200, name);
    const got = (await res.json()) as Echo;
    assert.equal(got.body, body, name);
    assert.equal(got.headers["content-length"], String(Buffer.byteLength(body)), name);
    assert.equal(got.headers["content-type"], type, name);
  }
  const empty = (await (await nodeFetch(`${base}/echo`, { method: "POST" })).json()) as Echo;
  assert.equal(empty.headers["content-length"], "0", "a POST without a body says so");
});

test("nodeFetch takes a Request, a URL and headers in every HeadersInit form", async () => {
  const viaRequest = (await (await nodeFetch(new Request(`${base}/echo?q=1`, { method: "PUT", headers: { "X-A": "1" }, body: "req" }))).json()) as Echo;
  assert.deepEqual([viaRequest.method, viaRequest.headers["x-a"], viaRequest.body], ["PUT", "1", "req"]);
  // init's members win over the Request's, as in fetch(req, init).
  const overridden = (await (await nodeFetch(new Request(`${base}/echo`, { method: "PUT", body: "req" }), { method: "POST", body: "init" })).json()) as Echo;
  assert.deepEqual([overridden.method, overridden.body], ["POST", "init"]);
  for (const headers of [new Headers({ "X-B": "2" }), [["X-B", "2"]] as [string, string][], { "x-b": "2" }]) {
    const got = (await (await nodeFetch(new URL(`${base}/echo`), { headers })).json()) as Echo;
    assert.equal(got.headers["x-b"], "2", JSON.stringify(headers));
  }
});

test("nodeFetch answers with status, repeated headers, empty bodies and long bodies intact", async () => {
  const res = await nodeFetch(`${base}/echo`);
  assert.equal(res.headers.get("x-multi"), "a, b");
  assert.equal(res.statusText, "OK");
  const none = await nodeFetch(`${base}/no-content`, { method: "DELETE" });
  assert.equal(none.status, 204);
  assert.equal(none.body, null);
  const head = await nodeFetch(`${base}/echo`, { method: "HEAD" });
  assert.equal(head.status, 200);
  assert.equal(head.body, null);
  const missing = await nodeFetch(`${base}/elsewhere`);
  assert.equal(missing.status, 404);
  assert.equal(missing.ok, false);
  const big = new Uint8Array(await (await nodeFetch(`${base}/big`)).arrayBuffer());
  assert.equal(big.length, 3 << 20);
  assert.ok(big.every((b) => b === 7));
});

test("nodeFetch streams a body without a length as it arrives", async () => {
  const res = await nodeFetch(`${base}/stream`);
  const reader = res.body!.getReader();
  const first = await reader.read();
  assert.equal(new TextDecoder().decode(first.value), "data: one\n\n", "the first chunk arrives before the server ends");
  release();
  let rest = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    rest += new TextDecoder().decode(value);
  }
  assert.equal(rest, "data: two\n\n");
});

test("nodeFetch rejects as fetch does: TypeError without an answer, the signal's reason when aborted", async () => {
  await assert.rejects(nodeFetch(`${base}/hang-up`), (err: unknown) => err instanceof TypeError && (err as Error).cause !== undefined);
  await assert.rejects(nodeFetch(`${base}/cut`), (err: unknown) => err instanceof TypeError && /cut short/.test((err as Error).message));
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((r) => closed.close(r));
  await assert.rejects(nodeFetch(`http://127.0.0.1:${port}/`), (err: unknown) => err instanceof TypeError);
  await assert.rejects(nodeFetch("ftp://127.0.0.1/x"), (err: unknown) => err instanceof TypeError && /ftp:/.test((err as Error).message));

  await assert.rejects(nodeFetch(`${base}/echo`, { signal: AbortSignal.abort() }), (err: unknown) => (err as Error).name === "AbortError");
  const waiting = new AbortController();
  const pending = nodeFetch(`${base}/never`, { signal: waiting.signal });
  setTimeout(() => waiting.abort(), 50);
  await assert.rejects(pending, (err: unknown) => (err as Error).name === "AbortError");

  const reading = new AbortController();
  const res = await nodeFetch(`${base}/stream`, { signal: reading.signal });
  const reader = res.body!.getReader();
  await reader.read();
  reading.abort();
  await assert.rejects(reader.read());
  release();
});
