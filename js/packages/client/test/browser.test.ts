// @convlog/client in a real browser (headless Chromium via playwright-core,
// never a downloaded browser): the package's ES module build and its two
// dependencies are served to a page on another origin, which that origin
// being allowed by agentd's CORS list (--http-cors-origin) creates a
// thread under an external id, appends, follows the events over SSE,
// stores and reads a blob and soft-deletes the thread. The core uses only
// fetch, web streams and TextDecoder, so nothing Node-only is needed.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { readFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { dirname, join, resolve, extname } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { chromium, type Browser } from "playwright-core";
import { startAgentd, keys, type Agentd } from "@convlog/testing";

const here = dirname(fileURLToPath(import.meta.url)); // dist/test
const require = createRequire(import.meta.url);
const pkgDir = (name: string) => {
  let d = dirname(require.resolve(name));
  while (!existsSync(join(d, "package.json"))) d = dirname(d);
  return d;
};
const files: Record<string, string> = {
  "/client/index.js": resolve(here, "../src/index.js"),
  "/deps/openapi-fetch.js": join(pkgDir("openapi-fetch"), "dist/index.mjs"),
  "/deps/eventsource-parser.js": join(pkgDir("eventsource-parser"), "dist/index.js"),
};
const chromiumPath = process.env.CONVLOG_CHROMIUM ?? "/usr/bin/chromium";

let agentd: Agentd;
let page: Server;
let pageOrigin: string;
let browser: Browser;

function html(api: string): string {
  return `<!doctype html><html><head><meta charset="utf-8">
<script type="importmap">{"imports":{"openapi-fetch":"/deps/openapi-fetch.js","eventsource-parser":"/deps/eventsource-parser.js"}}</script>
</head><body><script type="module">
import { ConvlogClient, ConvlogError } from "/client/index.js";
window.run = async (apiKey) => {
  const c = new ConvlogClient({ baseUrl: ${JSON.stringify(api)}, apiKey });
  const out = {};
  try {
    const { thread, created } = await c.ensureThread("browser tab · 1", { title: "from a page" });
    out.created = created; out.thread = thread.thread; out.external = thread.external_id;
    await c.append("browser tab · 1", [{ type: "message.user", payload: { content: "hi from the browser" } }]);
    const ctl = new AbortController();
    const seen = [];
    for await (const ev of c.events("browser tab · 1", { signal: ctl.signal })) {
      seen.push(ev.type);
      if (seen.length === 2) ctl.abort();
    }
    out.events = seen;
    await c.putBlob("browser tab · 1", "notes/1", new TextEncoder().encode("blob bytes"), "text/plain");
    out.blob = new TextDecoder().decode(await c.getBlob("browser tab · 1", "notes/1"));
    await c.deleteThread("browser tab · 1");
    out.deleted = true;
  } catch (err) {
    out.error = err instanceof ConvlogError ? "ConvlogError " + err.status : String(err);
  }
  return out;
};
window.ready = true;
</script></body></html>`;
}

before(async () => {
  page = createServer(async (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/") {
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" }).end(html(agentd.url));
      return;
    }
    const f = files[path];
    if (!f) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "Content-Type": extname(f) === ".html" ? "text/html; charset=utf-8" : "text/javascript; charset=utf-8" }).end(await readFile(f));
  });
  await new Promise<void>((r) => page.listen(0, "127.0.0.1", r));
  pageOrigin = `http://127.0.0.1:${(page.address() as { port: number }).port}`;
  // localhost is the same machine under another origin: not in the allowed list.
  agentd = await startAgentd(["--http-cors-origin", pageOrigin]);
  browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
});
after(async () => {
  await browser?.close();
  await agentd?.stop();
  page?.close();
});

async function runIn(origin: string): Promise<Record<string, unknown>> {
  const ctx = await browser.newContext();
  try {
    const p = await ctx.newPage();
    await p.goto(origin + "/");
    await p.waitForFunction(() => (window as unknown as { ready?: boolean }).ready === true);
    return await p.evaluate((key) => (window as unknown as { run: (k: string) => Promise<Record<string, unknown>> }).run(key), keys.acme);
  } finally {
    await ctx.close();
  }
}

test("the client runs in Chromium on an allowed origin: REST, SSE, blobs", async () => {
  const out = await runIn(pageOrigin);
  assert.equal(out.error, undefined, `no error in the page: ${String(out.error)}`);
  assert.equal(out.created, true);
  assert.match(String(out.thread), /^ext-[a-z2-7]{32}$/);
  assert.equal(out.external, "browser tab · 1");
  assert.deepEqual(out.events, ["thread.created", "message.user"]);
  assert.equal(out.blob, "blob bytes");
  assert.equal(out.deleted, true);
});

test("a page on an origin that is not allowed is refused by the browser", async () => {
  const other = pageOrigin.replace("127.0.0.1", "localhost");
  const out = await runIn(other);
  assert.match(String(out.error), /TypeError|Failed to fetch/, `the browser blocks the response: ${JSON.stringify(out)}`);
  assert.equal(out.created, undefined);
});
