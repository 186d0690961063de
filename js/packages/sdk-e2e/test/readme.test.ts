// The TypeScript blocks of the README's Quickstart, run as a user copies
// them: each is type-checked with the real types of `openai` and
// `@convlog/client`, then run by Node as plain JavaScript (a .mjs file
// under js/, where the workspace's packages resolve) against a real
// `agentd serve` started as the README's first command, without API keys.
// The README is the single source: the blocks are those marked
// <!-- quickstart: ts ... --> in its Quickstart section.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/** js/packages/sdk-e2e/dist/test -> the package, js/ and the repository root. */
const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, "../..");
const js = resolve(pkg, "../..");
const repo = resolve(js, "..");

/** The blocks marked <!-- quickstart: KIND --> in README.md's Quickstart section, by kind. */
function quickstartBlocks(): Map<string, string> {
  const readme = readFileSync(join(repo, "README.md"), "utf8");
  const start = readme.indexOf("\n## Quickstart\n");
  assert.ok(start >= 0, "README.md has no Quickstart section");
  const rest = readme.slice(start + 1);
  const end = rest.indexOf("\n## ", 3);
  const section = end >= 0 ? rest.slice(0, end + 1) : rest;
  const blocks = new Map<string, string>();
  for (const m of section.matchAll(/^<!-- quickstart: ([a-z ]+) -->\n```[a-z]*\n([\s\S]*?)^```$/gm)) {
    blocks.set(m[1], m[2]);
  }
  return blocks;
}

let agentd: ChildProcess | undefined;
let exited: Promise<void> | undefined;
let url = "";
let work = "";

/** Builds agentd and runs `agentd serve` on a temporary data directory and a port the kernel picks; resolves with the HTTP API's base URL from its banner. */
async function startServe(): Promise<string> {
  work = mkdtempSync(join(tmpdir(), "convlog-readme-"));
  const bin = join(work, "agentd");
  execFileSync("go", ["build", "-o", bin, "./agentd"], { cwd: repo, stdio: "inherit" });
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("CONVLOG_")) env[k] = v;
  Object.assign(env, { CONVLOG_DATA_DIR: join(work, "data"), CONVLOG_HTTP_ADDR: "127.0.0.1:0", CONVLOG_LOG_LEVEL: "warn" });
  const child = spawn(bin, ["serve"], { env, stdio: ["ignore", "pipe", "inherit"] });
  agentd = child;
  exited = new Promise((res) => child.once("exit", () => res()));
  const lines = createInterface({ input: child.stdout! });
  const found = new Promise<string>((res, rej) => {
    let base = "";
    lines.on("line", (line) => {
      const m = /^\s*HTTP API:\s*(\S+)\/v1\/threads$/.exec(line);
      if (m) base = m[1];
      if (base && /^\s*curl /.test(line)) res(base); // the banner's last line
    });
    child.once("exit", (code) => rej(new Error(`agentd serve exited (${code}) before its banner (see its stderr above)`)));
    setTimeout(() => rej(new Error("agentd serve printed no banner within 2 minutes")), 120_000).unref();
  });
  return found;
}

before(async () => {
  if (!existsSync(join(js, "packages/client/dist/src/index.js"))) {
    execFileSync("npm", ["run", "build", "-w", "@convlog/client"], { cwd: js, stdio: "inherit" });
  }
  url = await startServe();
});

after(async () => {
  if (agentd && agentd.exitCode === null) {
    agentd.kill("SIGTERM");
    await exited;
  }
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Type-checks src as an ES module beside the workspace's packages; returns the diagnostics as text. */
function typeCheck(file: string): string {
  const program = ts.createProgram([file], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
    types: ["node"],
    strict: true,
    skipLibCheck: true,
    noEmit: true,
  });
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"))
    .join("\n");
}

/** Runs src with Node as js/packages/sdk-e2e/dist/readme/<name>.mjs, CONVLOG_URL set; returns its stdout. */
function runBlock(name: string, src: string): string {
  const dir = join(pkg, "dist/readme");
  mkdirSync(dir, { recursive: true });
  const mts = join(dir, `${name}.mts`);
  writeFileSync(mts, src);
  assert.equal(typeCheck(mts), "", `the README's ${name} block type-checks`);
  const mjs = join(dir, `${name}.mjs`);
  writeFileSync(mjs, src);
  return execFileSync(process.execPath, [mjs], {
    env: { ...process.env, CONVLOG_URL: url },
    encoding: "utf8",
    timeout: 60_000,
    stdio: ["ignore", "pipe", "inherit"],
  });
}

test("the README's openai block gets the demo agent's answer from /v1/chat/completions", () => {
  const src = quickstartBlocks().get("ts openai");
  assert.ok(src, "README.md's Quickstart has a block marked <!-- quickstart: ts openai -->");
  assert.match(src, /from "openai"/);
  assert.equal(runBlock("openai", src), "6*7 = 42.\n");
});

test("the README's @convlog/client block creates a thread, sends a message and follows the answer over SSE", () => {
  const src = quickstartBlocks().get("ts convlog");
  assert.ok(src, "README.md's Quickstart has a block marked <!-- quickstart: ts convlog -->");
  assert.match(src, /from "@convlog\/client"/);
  assert.equal(runBlock("convlog", src), "6*7 = 42.\n");
});
