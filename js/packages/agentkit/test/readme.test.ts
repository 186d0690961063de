// The README's example, as written: taken from README.md, type-checked
// against the package, and run in a fresh process against a real agentd
// with no model key (OPENAI_API_KEY unset): convlog's offline agent is the
// model, and one thread holds both turns.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import ts from "typescript";
import { ConvlogClient } from "@convlog/client";
import { startAgentd, keys, type Agentd } from "@convlog/testing";
import { chatThreadId } from "../src/index.js";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "../..");

let agentd: Agentd;
before(async () => {
  agentd = await startAgentd();
});
after(async () => {
  await agentd?.stop();
});

type Msg = { role: string; content?: unknown; tool_calls?: { name: string }[] };

test("the README example runs as written, with no model key", async () => {
  const readme = readFileSync(join(pkg, "README.md"), "utf8");
  const m = /```ts\n([\s\S]*?)```/.exec(readme);
  assert.ok(m, "README.md has a ts example");
  const dir = join(pkg, "dist", "readme");
  mkdirSync(dir, { recursive: true });
  const src = join(dir, "example.ts");
  writeFileSync(src, m[1]);

  // Type-check it as a user's module would be (the package's compiler options).
  const program = ts.createProgram([src], {
    target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true, noEmit: true, skipLibCheck: true, types: ["node"], lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
  });
  const diags = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
  assert.deepEqual(diags, [], "the example type-checks");

  const js = ts.transpileModule(m[1], { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } }).outputText;
  const out = join(dir, "example.mjs");
  writeFileSync(out, js);
  const env: NodeJS.ProcessEnv = { ...process.env, CONVLOG_URL: agentd.url, CONVLOG_API_KEY: keys.acme };
  delete env.OPENAI_API_KEY;
  const { stdout } = await promisify(execFile)(process.execPath, [out], { env, timeout: 60_000 });
  assert.match(stdout, /shipped/, "the first turn is answered from the tool's result");
  assert.match(stdout, /thanks!/, "the second turn is answered by the offline agent");

  const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
  const page = await client.listThreads({});
  const thread = chatThreadId("demo", "", "customer-42/ticket 7");
  assert.deepEqual(page.threads.map((t: { thread?: string }) => t.thread), [thread], "one thread");
  const msgs = (await client.getThread(thread, { consistent: true })).messages as unknown as Msg[];
  assert.deepEqual(msgs.map((x) => x.role), ["user", "assistant", "tool", "assistant", "user", "assistant"]);
  assert.equal(msgs[1].tool_calls?.[0].name, "lookup");
  assert.equal(msgs[2].content, JSON.stringify({ data: { order: 7, status: "shipped" } }));
});
