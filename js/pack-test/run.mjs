#!/usr/bin/env node
// The published-package test: what a user gets from `npm install`, not what
// the workspace sees. Run from anywhere (Node 20+, npm, go; network to the
// npm registry):
//
//   node js/pack-test/run.mjs        # after `cd js && npm ci`
//
// 1. `npm pack` every public package of the workspace (its prepack builds it;
//    with CI=true or PACK_TEST_CLEAN=1 the dist/ folders are removed first,
//    so an unbuilt pack is caught) and checks each tarball: LICENSE,
//    repository, homepage, keywords, a prepack, no exact @convlog/* version
//    pins, every file its .d.ts files import is in it and every package they
//    import is a declared dependency or peer; and that the client's
//    committed src/schema.ts is what its prepack generated.
// 2. Creates a fresh project in a temporary directory outside the repository
//    and installs the tarballs there with the READMEs' own `npm install`
//    lines (@convlog/* names replaced by the tarballs; everything else, peers
//    included, from the registry); `npm ls` must report no problem.
// 3. Compiles a TypeScript file using each package's main types against
//    them with skipLibCheck: false (must pass, and the client's types must
//    not be `any`), then a file of deliberate type errors (must fail with
//    exactly those errors). A known error in a third party's own
//    declarations (list `upstream`) is printed, not failed.
// 4. Builds @convlog/client's sources (its prepack) outside the repository.
// 5. Runs each package README's first TypeScript example, compiled (with
//    the rest, skipLibCheck: false) as written, against a real agentd built
//    from this repository and started on a free loopback port: the only
//    change is that the example's http://127.0.0.1:8080 becomes agentd's
//    address. The identifiers a README leaves to the reader (LangGraph's
//    callModel, AG2B's agent: AG2B is not on npm, so the package's test
//    implementation of its surface) are defined in a preamble, and a few
//    lines after an example check what it stored.
//
// Exits 0 when every check passed; prints each failure and exits 1
// otherwise. PACK_TEST_KEEP=1 keeps the temporary directory.
import { execFile, execFileSync, spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const js = resolve(here, "..");
const repo = resolve(js, "..");
const work = mkdtempSync(join(tmpdir(), "convlog-pack-test-"));
if (!relative(repo, work).startsWith("..")) throw new Error(`temporary directory ${work} is inside the repository`);
// Removed on every exit (an uncaught error included) unless PACK_TEST_KEEP=1.
process.on("exit", () => {
  if (process.env.PACK_TEST_KEEP === "1") console.log(`kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
});
const t0 = Date.now();
const failures = [];
const log = (msg) => console.log(`[pack-test ${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
function fail(msg) {
  failures.push(msg);
  console.log(`  FAIL: ${msg}`);
}
function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 64 << 20, ...opts });
}
/** Runs cmd and returns {ok, out} (stdout and stderr together) instead of throwing. */
function attempt(cmd, args, opts = {}) {
  try {
    return { ok: true, out: run(cmd, args, opts) };
  } catch (e) {
    return { ok: false, out: `${e.stdout ?? ""}${e.stderr ?? ""}` || String(e) };
  }
}
const indent = (s) => s.trim().split("\n").slice(0, 40).map((l) => `    ${l}`).join("\n");

// The public packages, in the workspace's order.
const root = JSON.parse(readFileSync(join(js, "package.json"), "utf8"));
const pkgs = root.workspaces
  .map((w) => ({ dir: join(js, w), json: JSON.parse(readFileSync(join(js, w, "package.json"), "utf8")) }))
  .filter((p) => !p.json.private)
  .map((p) => ({ ...p, name: p.json.name, short: p.json.name.replace(/^@convlog\//, "") }));

// 1. Pack.
if (process.env.CI === "true" || process.env.PACK_TEST_CLEAN === "1") {
  log("removing dist/ of the packed packages (an unbuilt checkout must pack built code)");
  for (const p of pkgs) rmSync(join(p.dir, "dist"), { recursive: true, force: true });
}
const tarballs = join(work, "tarballs");
mkdirSync(tarballs);
for (const p of pkgs) {
  log(`npm pack ${p.name}`);
  const r = attempt("npm", ["pack", "--pack-destination", tarballs, "--json"], { cwd: p.dir });
  if (!r.ok) {
    fail(`npm pack ${p.name} failed:\n${indent(r.out)}`);
    continue;
  }
  const info = JSON.parse(r.out.slice(r.out.lastIndexOf("[\n  {")))[0]; // after the prepack's own output
  p.tarball = join(tarballs, info.filename);
  p.files = info.files.map((f) => f.path);
  console.log(`  ${info.filename}: ${p.files.join(", ")}`);
}

// The client's prepack regenerated src/schema.ts from agentd's OpenAPI
// document: the committed file must be that one (it is what builds outside
// the repository use).
{
  const r = attempt("git", ["-C", repo, "status", "--porcelain", "--", "js/packages/client/src/schema.ts"]);
  if (!r.ok) console.log("  note: not a git checkout; src/schema.ts not compared with the committed one");
  else if (r.out.trim()) fail(`js/packages/client/src/schema.ts differs from the committed one after npm run generate (agentd/httpapi/openapi.json changed): commit it\n${indent(r.out)}`);
}

// Tarball checks, on the package.json and files inside the tarball.
const builtins = new Set(["node:"]);
for (const p of pkgs.filter((p) => p.tarball)) {
  const x = join(work, "unpacked", p.short);
  mkdirSync(x, { recursive: true });
  run("tar", ["-xzf", p.tarball, "-C", x]);
  const dir = join(x, "package");
  const pj = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  if (!existsSync(join(dir, "LICENSE"))) fail(`${p.name}: the tarball has no LICENSE file`);
  else if (pj.license === "Apache-2.0" && !readFileSync(join(dir, "LICENSE"), "utf8").includes("Apache License")) fail(`${p.name}: LICENSE is not the Apache License its license field names`);
  for (const k of ["license", "repository", "homepage", "keywords"]) if (!pj[k]) fail(`${p.name}: package.json has no ${k}`);
  if (!pj.scripts?.prepack) fail(`${p.name}: no prepack script (an unbuilt npm pack ships no code)`);
  if (!p.files.some((f) => f === pj.types?.replace(/^\.\//, ""))) fail(`${p.name}: its types file ${pj.types} is not in the tarball`);
  if (!p.files.some((f) => f === pj.main?.replace(/^\.\//, ""))) fail(`${p.name}: its main file ${pj.main} is not in the tarball`);
  const declared = { ...pj.dependencies, ...pj.peerDependencies };
  for (const [n, v] of Object.entries(declared)) {
    if (n.startsWith("@convlog/") && /^\d/.test(v)) fail(`${p.name}: ${n} is pinned to exactly ${v} (a range such as ^${v} lets one copy serve every package)`);
  }
  // Every module a .d.ts imports: relative ones must be in the tarball,
  // bare ones declared (dependencies or peerDependencies).
  const dts = p.files.filter((f) => f.endsWith(".d.ts"));
  for (const f of dts) {
    const text = readFileSync(join(dir, f), "utf8");
    for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)["']([^"']+)["']/g)) {
      const spec = m[1];
      if (spec.startsWith(".")) {
        const target = join(dirname(f), spec).replace(/\.js$/, ".d.ts").split(sep).join("/");
        if (!p.files.includes(target)) fail(`${p.name}: ${f} imports ${spec}, but ${target} is not in the tarball`);
        continue;
      }
      if (spec.startsWith("node:") || builtins.has(spec)) continue;
      const pkg = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0];
      if (!declared[pkg]) fail(`${p.name}: ${f} imports ${spec}, but ${pkg} is neither a dependency nor a peer`);
    }
  }
}

// 2. A fresh project outside the repository.
const app = join(work, "app");
mkdirSync(app);
for (let d = dirname(app); ; d = dirname(d)) {
  if (existsSync(join(d, "node_modules")) || existsSync(join(d, "package.json"))) fail(`${d} has a node_modules or package.json above the fresh project`);
  if (dirname(d) === d) break;
}
writeFileSync(join(app, "package.json"), JSON.stringify({ name: "convlog-pack-test-app", version: "0.0.0", private: true, type: "module" }, null, 2));
const npmInstall = (args) => attempt("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", ...args], { cwd: app });
/** The README's `npm install ...` line (in a sh block), or undefined. */
function installLine(readme) {
  for (const b of readme.matchAll(/^```(?:sh|bash|shell)\n([\s\S]*?)^```$/gm)) {
    const line = b[1].split("\n").find((l) => /^npm (install|i) /.test(l.trim()));
    if (line) return line.trim().replace(/\s+#.*$/, "");
  }
  return undefined;
}
// One npm install of the user's tooling and every README's install line
// (the union: one application using all the packages).
const byName = new Map(pkgs.map((p) => [p.name, p]));
const tsVersion = JSON.parse(readFileSync(join(js, "node_modules/typescript/package.json"), "utf8")).version;
const installs = new Set([`typescript@${tsVersion}`, "@types/node@^20"]);
for (const p of pkgs.filter((p) => p.tarball)) {
  const readme = readFileSync(join(p.dir, "README.md"), "utf8");
  // npm shows the README on its own page: a relative link resolves there,
  // not in this repository.
  for (const [, target] of readme.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (!/^(https?:|mailto:|#)/.test(target)) fail(`${p.name}: its README links ${target}, which breaks on npm's page: link an absolute URL`);
  }
  const line = installLine(readme);
  if (line) console.log(`  ${p.name}'s README: ${line}`);
  else console.log(`  note: ${p.name}'s README has no npm install line; installing its tarball alone`);
  for (const a of line ? line.split(/\s+/).slice(2) : [p.name]) installs.add(byName.get(a)?.tarball ?? a);
}
log(`npm install ${[...installs].map((a) => (a.startsWith(tarballs) ? relative(tarballs, a) : a)).join(" ")}`);
{
  const r = npmInstall([...installs]);
  if (!r.ok) fail(`npm install failed:\n${indent(r.out)}`);
  else {
    const ls = attempt("npm", ["ls", "--depth=0"], { cwd: app });
    console.log(indent(ls.out));
    if (!ls.ok) fail(`npm ls reports problems in the installed tree (a missing or invalid peer):\n${indent(ls.out)}`);
  }
}

// agentd, built while the TypeScript compiles (the README examples need it).
const bin = join(work, "agentd");
const built = new Promise((res) => execFile("go", ["build", "-o", bin, "./agentd"], { cwd: repo }, (err, _o, stderr) => res(err ? `${err.message}\n${stderr}` : undefined)));

// 3. Types: compile against the installed packages, skipLibCheck false.
const tsc = join(app, "node_modules/typescript/bin/tsc");
const compilerOptions = {
  target: "ES2022",
  module: "NodeNext",
  moduleResolution: "NodeNext",
  strict: true,
  skipLibCheck: false,
  types: ["node"],
};
// Errors in a third party's own declarations that no version fixes yet: each
// is reported, not failed, and only in exactly this form.
const upstream = [
  {
    re: /^node_modules\/@inngest\/agent-kit\/dist\/[^/(]+\.d\.ts\(\d+,\d+\): error TS2339: Property 'ctx' does not exist on type 'AsyncContext'\.$/,
    why: "@inngest/agent-kit 0.13.2 (the latest) declares AsyncContext[\"ctx\"], which inngest's AsyncContext no longer has (it is execution.ctx in inngest 3.54)",
  },
];
const noted = new Set();
/** tsc -p over files; errors are its error lines less the known upstream ones. */
function compile(name, files, extra = {}) {
  const cfg = join(app, `tsconfig.${name}.json`);
  writeFileSync(cfg, JSON.stringify({ compilerOptions: { ...compilerOptions, ...extra }, files }, null, 2));
  const r = attempt("node", [tsc, "-p", cfg, "--pretty", "false"], { cwd: app });
  const errors = [];
  for (const l of r.out.split("\n").filter((l) => /error TS\d+/.test(l))) {
    const u = upstream.find((u) => u.re.test(l));
    if (!u) errors.push(l);
    else if (!noted.has(u)) noted.add(u), console.log(`  note (not ours, not failed): ${l}\n    ${u.why}`);
  }
  if (!r.ok && !errors.length && !/error TS\d+/.test(r.out)) errors.push(r.out.trim() || "tsc failed");
  return { ...r, errors };
}
writeFileSync(
  join(app, "types.ts"),
  `// Each package's main types, as a user imports them.
import { ConvlogClient, ConvlogError, nodeFetch, type Event, type StoredEvent, type Thread } from "@convlog/client";
import { ConvlogClient as NodeEntryClient } from "@convlog/client/node";
import { convlogHistory, type ConvlogHistory } from "@convlog/agentkit";
import { ConvlogSaver } from "@convlog/langgraph";
import { convlogPlugin, type AG2BPlugin, type ChatMessage } from "@convlog/ag2b";
import type { HistoryConfig } from "@inngest/agent-kit";
import { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";

// NotAny<T> is never when T is any: a type that silently became any fails.
type IsAny<T> = 0 extends 1 & T ? true : false;
type NotAny<T> = IsAny<T> extends true ? never : T;

const client = new ConvlogClient({ baseUrl: "http://127.0.0.1:8080", apiKey: "sk" });
export async function types(): Promise<void> {
  const { thread, created }: { thread: NotAny<Thread>; created: boolean } = await client.ensureThread("run-42", { agent: "demo" });
  const version: NotAny<typeof thread.version> = thread.version;
  const appended = await client.append(thread.thread, [{ type: "message.user", payload: { content: "hi" } }], { expectVersion: version });
  const noAny: NotAny<typeof appended> = appended;
  for await (const ev of client.events(thread.thread)) {
    const e: NotAny<StoredEvent> = ev;
    const seq: NotAny<typeof ev.seq> = ev.seq;
    void e, seq;
  }
  const history: HistoryConfig<{ n: number }> = convlogHistory<{ n: number }>({ client });
  const typed: ConvlogHistory<{ n: number }> = convlogHistory({ client });
  const saver: BaseCheckpointSaver = new ConvlogSaver({ client });
  const plugin: AG2BPlugin = convlogPlugin({ client, threadId: "session-42" });
  const m: ChatMessage = { role: "user", content: "hello" };
  const toAppend: NotAny<Event> = { type: "message.user", payload: { content: "hello" } };
  // Under Node the package resolves to its Node entry (nodeFetch is in its types).
  const viaNode: typeof fetch = nodeFetch;
  const sameClient: typeof ConvlogClient = NodeEntryClient;
  void created, noAny, history, typed, saver, plugin, m, toAppend, ConvlogError, viaNode, sameClient;
}
`,
);

// The README examples, written beside types.ts and compiled with it.
function firstTsBlock(readme) {
  return /^```ts\n([\s\S]*?)^```$/m.exec(readme)?.[1];
}
const examples = [
  { pkg: "@convlog/client", expect: /message\.assistant/ },
  { pkg: "@convlog/agentkit", expect: /\S/ },
  {
    pkg: "@convlog/langgraph",
    preamble: `// Left to the reader by the README: the graph's model node.
const callModel = async (state: typeof MessagesAnnotation.State) => ({ messages: [{ role: "assistant", content: \`echo: \${state.messages.length}\` }] });
`,
    postamble: `
// Check: the checkpoint is in convlog.
const stored = await new ConvlogSaver({ client }).getTuple({ configurable: { thread_id: "user-7/chat 1" } });
if (!stored) throw new Error("no checkpoint stored");
console.log("checkpoint", stored.checkpoint.id);
`,
    expect: /checkpoint \S+/,
  },
  {
    pkg: "@convlog/ag2b",
    preamble: `// Left to the reader by the README: an AG2B agent (AG2B is not on npm; this
// is the package's test implementation of AG2B's documented surface).
import { MiniAgent } from "./mini-ag2b.js";
const agent = new MiniAgent({});
`,
    postamble: `
// Check: the user and assistant messages and the reset are in the thread.
const { thread } = await client.ensureThread("session-42");
const types: string[] = [];
for await (const ev of client.events(thread.thread)) {
  types.push(String(ev.type));
  if (ev.type === "thread.reset") break;
}
console.log("events", types.join(" "));
`,
    expect: /events .*message\.user.*message\.assistant.*thread\.reset/,
  },
];
// The base URL every example names; replaced by agentd's once it runs.
const URL_MARK = "http://127.0.0.1:8080";
const readmeDir = join(app, "readme");
mkdirSync(readmeDir);
writeFileSync(join(readmeDir, "mini-ag2b.ts"), readFileSync(join(js, "packages/ag2b/test/mini-ag2b.ts"), "utf8").replace(`"../src/index.js"`, `"@convlog/ag2b"`));
for (const ex of examples) {
  const p = byName.get(ex.pkg);
  ex.block = firstTsBlock(readFileSync(join(p.dir, "README.md"), "utf8"));
  ex.file = join("readme", `${p.short}.ts`);
  if (!ex.block) fail(`${ex.pkg}: its README has no ts example`);
  else if (!ex.block.includes(URL_MARK)) fail(`${ex.pkg}: its README example names no ${URL_MARK} to point at agentd`);
  else writeFileSync(join(app, ex.file), (ex.preamble ?? "") + ex.block + (ex.postamble ?? ""));
}
const present = examples.filter((ex) => existsSync(join(app, ex.file)));
log("@convlog/client under Node: the installed package resolves to its Node entry");
{
  const r = attempt("node", ["--input-type=module", "-e",
    "const m = await import('@convlog/client'); const n = await import('@convlog/client/node');" +
    " if (m.ConvlogClient !== n.ConvlogClient || typeof m.nodeFetch !== 'function') { console.error('@convlog/client is not its Node entry'); process.exit(1); }"], { cwd: app });
  if (!r.ok) fail(`@convlog/client does not resolve to its Node entry under Node:\n${indent(r.out)}`);
  else console.log("  ok");
}
log(`tsc types.ts and the README examples (${present.map((ex) => ex.pkg).join(", ")}), skipLibCheck: false: must compile`);
{
  const r = compile("main", ["types.ts", "readme/mini-ag2b.ts", ...present.map((ex) => ex.file)], { outDir: "out", rootDir: "." });
  const errs = r.errors;
  if (errs.length) {
    const mine = (f) => errs.filter((l) => l.startsWith(`${f}(`));
    for (const ex of present) if (mine(ex.file).length) (ex.broken = true), fail(`${ex.pkg}: its README example does not compile:\n${indent(mine(ex.file).join("\n"))}`);
    const rest = errs.filter((l) => !present.some((ex) => l.startsWith(`${ex.file}(`)));
    if (rest.length) fail(`types.ts (or a library's declarations) does not compile against the installed packages:\n${indent(rest.join("\n"))}`);
    if (rest.length) for (const ex of present) ex.broken = true; // a declaration error: nothing was checked
  } else console.log("  ok");
}
// Deliberate errors: each line marked "// error TSnnnn" must report exactly
// that error, and no other line may report one.
writeFileSync(
  join(app, "wrong.ts"),
  `import { ConvlogClient } from "@convlog/client";
import { convlogHistory } from "@convlog/agentkit";
import { ConvlogSaver } from "@convlog/langgraph";
import { convlogPlugin } from "@convlog/ag2b";

const client = new ConvlogClient({ baseUrl: "http://127.0.0.1:8080" });
const { thread } = await client.ensureThread("run-42");
const version: string = thread.version; // error TS2322
await client.append(thread.thread, [{ typ: "message.user" }]); // error TS2561
new ConvlogClient({ baseUrl: 8080 }); // error TS2322
new ConvlogSaver({ client: "http://127.0.0.1:8080" }); // error TS2322
convlogHistory({ client: { baseUrl: "http://127.0.0.1:8080" } }); // error TS2740
convlogPlugin({ client, threadId: 42 }); // error TS2322
void version;
`,
);
log("tsc wrong.ts: must fail with exactly its marked errors");
{
  const lines = readFileSync(join(app, "wrong.ts"), "utf8").split("\n");
  const want = new Set(lines.flatMap((l, i) => (/\/\/ error (TS\d+)/.test(l) ? [`${i + 1} ${/\/\/ error (TS\d+)/.exec(l)[1]}`] : [])));
  const r = compile("wrong", ["wrong.ts"], { noEmit: true });
  const got = new Set(r.errors.flatMap((l) => /^wrong\.ts\((\d+),\d+\): error (TS\d+)/.exec(l)?.slice(1).join(" ") ?? []));
  const other = r.errors.filter((l) => !l.startsWith("wrong.ts("));
  if (r.ok) fail("wrong.ts compiled: a wrong type was accepted");
  const missing = [...want].filter((w) => !got.has(w));
  const extra = [...got].filter((g) => !want.has(g));
  if (missing.length || extra.length || other.length) {
    fail(`wrong.ts: want errors ${[...want].join(", ")} (line code); missing ${missing.join(", ") || "none"}; unexpected ${[...extra, ...other].join(", ") || "none"}:\n${indent(r.out)}`);
  } else console.log(`  ok, it fails with ${[...got].join(", ")}`);
}

// 4. @convlog/client's sources build outside the repository layout (its
// prepack, in a copy inside the fresh project).
{
  const client = byName.get("@convlog/client");
  const b = join(app, "client-build");
  mkdirSync(b);
  for (const f of ["package.json", "tsconfig.json", "tsconfig.build.json", "src", "scripts"]) if (existsSync(join(client.dir, f))) cpSync(join(client.dir, f), join(b, f), { recursive: true });
  rmSync(join(b, "src/schema.d.ts"), { force: true });
  log("@convlog/client: npm run prepack in a copy outside the repository");
  const r = attempt("npm", ["run", existsSync(join(b, "tsconfig.build.json")) ? "prepack" : "build"], { cwd: b });
  if (!r.ok) fail(`@convlog/client does not build outside the repository layout:\n${indent(r.out)}`);
  else if (!existsSync(join(b, "dist/src/index.d.ts"))) fail("@convlog/client: its build outside the repository wrote no dist/src/index.d.ts");
  else console.log("  ok");
}

// 5. The README examples, run against a real agentd.
let agentd;
try {
  const err = await built;
  if (err) throw new Error(`go build ./agentd: ${err}`);
  const port = await new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => res(p));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  const key = "sk-acme-0123456789";
  agentd = spawn(bin, ["serve", "--data-dir", join(work, "data"), "--http-addr", `127.0.0.1:${port}`], {
    env: { ...process.env, CONVLOG_API_KEYS: `acme:${key}`, CONVLOG_LOG_LEVEL: "warn" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (agentd.exitCode !== null) throw new Error("agentd serve exited before it was ready");
    if (await fetch(`${url}/healthz`).then((r) => r.ok, () => false)) break;
    if (Date.now() > deadline) throw new Error("agentd serve was not ready within 30 s");
    await new Promise((r) => setTimeout(r, 100));
  }
  log(`agentd serve on ${url}`);
  for (const ex of present.filter((ex) => !ex.broken)) {
    // The compiled example, its base URL pointed at this agentd.
    const js = join(app, "out", ex.file.replace(/\.ts$/, ".js"));
    writeFileSync(js, readFileSync(js, "utf8").replaceAll(URL_MARK, url));
    log(`${ex.pkg}: README example`);
    const r = attempt("node", [js], { cwd: app, timeout: 60_000, env: { ...process.env, CONVLOG_API_KEY: key, CONVLOG_URL: url } });
    if (!r.ok) fail(`${ex.pkg}: its README example failed:\n${indent(r.out)}`);
    else if (!ex.expect.test(r.out)) fail(`${ex.pkg}: its README example printed nothing matching ${ex.expect}:\n${indent(r.out)}`);
    else console.log(indent(r.out.split("\n").slice(-6).join("\n")));
  }
} catch (e) {
  fail(`README examples: ${e.message}`);
} finally {
  if (agentd && agentd.exitCode === null) {
    const exited = new Promise((r) => agentd.once("exit", r));
    agentd.kill("SIGTERM");
    await exited;
  }
}

log(failures.length ? `${failures.length} check(s) failed` : "ok: every check passed");
process.exit(failures.length ? 1 : 0);
