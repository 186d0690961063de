// LangGraph checkpoint savers side by side: MemorySaver, SqliteSaver,
// PostgresSaver (a throwaway PostgreSQL cluster, fsync on) and ConvlogSaver
// (a real `agentd serve` built from this repository), savers interleaved
// within each round. Started by hand, not in CI:
//
//   cd js && npm run build -w @convlog/langgraph && node packages/langgraph/bench/run.mjs [--rounds 3] [--graphs 10] [--steps 50,500]
//     [--durability async,sync] [--savers convlog,MemorySaver]   (PostgresSaver always runs: the ratios' reference)
//
// convlog runs twice: as configured by default (messagesAs: "checkpoint":
// the new messages inside the checkpoint event, a single-event append) and
// with messagesAs: "events" (the messages as message events and the
// checkpoint in one atomic batch).
//
// Each case runs --graphs graphs at once (each on its own thread) of a
// graph whose one node appends a short AI message and counts, for --steps
// steps, with default durability ("async") and with durability "sync".
// It prints a Markdown table: failed graphs, the median time per graph
// (and its ratio to PostgresSaver's), and p50/p99 of the savers' put,
// putWrites, getTuple and list calls (list: the 10 newest checkpoints of
// a thread; getTuple and list are also timed after each graph, 5 times
// each). PostgreSQL needs the binaries of $PG_BIN (default /usr/local/bin:
// initdb, pg_ctl, postgres); run as root, the cluster runs as the user
// postgres.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Annotation, END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { MemorySaver } from "@langchain/langgraph-checkpoint";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { ConvlogClient } from "@convlog/client";
import { ConvlogSaver } from "../dist/src/index.js";

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    graphs: { type: "string", default: "10" },
    steps: { type: "string", default: "50,500" },
    durability: { type: "string", default: "async,sync" },
    savers: { type: "string" },
  },
});
const rounds = Number(args.rounds);
const graphs = Number(args.graphs);
const stepsList = args.steps.split(",").map(Number);
const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
const pgBin = process.env.PG_BIN ?? "/usr/local/bin";
const tmp = mkdtempSync(join(tmpdir(), "convlog-lg-bench-"));
chmodSync(tmp, 0o755);

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

async function waitFor(what, f) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      if (await f()) return;
    } catch (err) {
      if (String(err?.message).includes("exited")) throw err;
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${what} did not start within 60 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const asPg = (cmd, argv) => (process.getuid?.() === 0 ? ["runuser", ["-u", "postgres", "--", cmd, ...argv]] : [cmd, argv]);

/** A throwaway PostgreSQL cluster with default settings (fsync and synchronous_commit on) on a free loopback port. */
async function startPostgres() {
  const data = join(tmp, "pg");
  execFileSync("mkdir", ["-p", data]);
  if (process.getuid?.() === 0) chownSync(data, Number(execFileSync("id", ["-u", "postgres"]).toString().trim()), 0);
  const port = await freePort();
  execFileSync(...asPg(join(pgBin, "initdb"), ["-D", data, "-U", "postgres", "-A", "trust", "--no-sync"]), { stdio: "ignore" });
  execFileSync(...asPg(join(pgBin, "pg_ctl"), ["-D", data, "-l", join(data, "server.log"), "-w", "-o",
    `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${data} -c max_connections=200 -c fsync=on`, "start"]), { stdio: "ignore" });
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    stop: () => execFileSync(...asPg(join(pgBin, "pg_ctl"), ["-D", data, "-m", "immediate", "-w", "stop"]), { stdio: "ignore" }),
  };
}

/** agentd serve built from this repository, on a free loopback port. */
async function startAgentd() {
  const bin = join(tmp, "agentd-bin");
  execFileSync("go", ["build", "-o", bin, "./agentd"], { cwd: repo, stdio: "inherit" });
  mkdirSync(join(tmp, "agentd-data"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(bin, ["serve", "--data-dir", join(tmp, "agentd-data"), "--http-addr", `127.0.0.1:${port}`], {
    env: { ...process.env, CONVLOG_API_KEYS: "bench:sk-bench-0123456789", CONVLOG_LOG_LEVEL: "warn" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  await waitFor("agentd", async () => {
    if (child.exitCode !== null) throw new Error("agentd serve exited (see its stderr above)");
    return (await fetch(`${url}/healthz`)).ok;
  });
  return {
    url,
    key: "sk-bench-0123456789",
    stop: () => new Promise((r) => (child.exitCode !== null ? r() : (child.once("exit", r), child.kill("SIGTERM")))),
    kill: () => child.kill("SIGKILL"),
  };
}

/** Wraps a saver's put, putWrites, getTuple and list so each call's time (ms) lands in `t[op]`. */
function timed(saver, t) {
  for (const op of ["put", "putWrites", "getTuple"]) {
    const f = saver[op].bind(saver);
    saver[op] = async (...a) => {
      const start = performance.now();
      try {
        return await f(...a);
      } finally {
        t[op].push(performance.now() - start);
      }
    };
  }
  const list = saver.list.bind(saver);
  saver.list = async function* (...a) {
    const start = performance.now();
    const all = [];
    for await (const x of list(...a)) all.push(x);
    t.list.push(performance.now() - start);
    yield* all;
  };
  return saver;
}

/** One node appending a short AI message and counting, looping for `steps` steps. */
function graphOf(saver, steps) {
  const State = Annotation.Root({ ...MessagesAnnotation.spec, n: Annotation({ reducer: (a, b) => a + b, default: () => 0 }) });
  return new StateGraph(State)
    .addNode("step", (s) => ({ n: 1, messages: [new AIMessage(`step ${s.n + 1}: done`)] }))
    .addEdge(START, "step")
    .addConditionalEdges("step", (s) => (s.n < steps ? "step" : END))
    .compile({ checkpointer: saver });
}

const pct = (xs, p) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const median = (xs) => pct(xs, 50);

const pg = await startPostgres();
let agentd;
try {
  agentd = await startAgentd();
} catch (err) {
  pg.stop();
  throw err;
}
// Ctrl-C (or a kill) stops agentd and the PostgreSQL cluster too.
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.once(sig, () => {
    agentd.kill();
    pg.stop();
    rmSync(tmp, { recursive: true, force: true });
    process.exit(130);
  });
}
const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: agentd.key });
const makers = {
  MemorySaver: async () => new MemorySaver(),
  SqliteSaver: async (r) => SqliteSaver.fromConnString(join(tmp, `sqlite-${r}.db`)),
  PostgresSaver: async () => {
    const s = PostgresSaver.fromConnString(pg.url);
    await s.setup();
    return s;
  },
  convlog: async () => new ConvlogSaver({ client }),
  // The new messages as message events beside the checkpoint: each put
  // with messages is an atomic batch of several events.
  'convlog, messagesAs "events"': async () => new ConvlogSaver({ client, messagesAs: "events" }),
};
// --savers (comma-separated names of makers) runs a subset; PostgresSaver
// stays in it, as the reference of the ratios.
const wanted = args.savers?.split(",").map((s) => s.trim());
const names = Object.keys(makers).filter((n) => !wanted || n === "PostgresSaver" || wanted.includes(n));
const cases = stepsList.flatMap((steps) => args.durability.split(",").map((durability) => ({ steps, durability })));
const results = new Map(); // case key -> saver -> {times, fails, ops}
const key = (c) => `${c.steps} steps, ${c.durability === "sync" ? '`durability: "sync"`' : "default durability (async)"}`;

try {
  for (let r = 0; r < rounds; r++) {
    for (const c of cases) {
      // Interleaved: every saver runs each case once per round, in a rotated order.
      const order = names.map((_, i) => names[(i + r) % names.length]);
      for (const name of order) {
        const saver = await makers[name](r);
        const res = results.get(key(c))?.get(name) ?? { times: [], fails: 0, errors: new Set(), ops: { put: [], putWrites: [], getTuple: [], list: [] } };
        timed(saver, res.ops);
        const graph = graphOf(saver, c.steps);
        const runs = Array.from({ length: graphs }, async (_, g) => {
          const thread_id = `bench-${name}-${c.steps}-${c.durability}-${r}-${g}-${Date.now()}`;
          const start = performance.now();
          try {
            const out = await graph.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id }, durability: c.durability, recursionLimit: c.steps + 10 });
            if (out.n !== c.steps) throw new Error(`ended at ${out.n} steps`);
            res.times.push(performance.now() - start);
            for (let i = 0; i < 5; i++) {
              await saver.getTuple({ configurable: { thread_id } });
              for await (const _ of saver.list({ configurable: { thread_id } }, { limit: 10 }));
            }
          } catch (err) {
            res.fails++;
            res.errors.add(String(err?.message ?? err).slice(0, 200));
          }
        });
        await Promise.all(runs);
        if (name === "PostgresSaver") await saver.end();
        if (name === "SqliteSaver") saver.db?.close?.();
        if (!results.has(key(c))) results.set(key(c), new Map());
        results.get(key(c)).set(name, res);
        process.stderr.write(`round ${r + 1}/${rounds} ${key(c)} ${name}: median ${median(res.times).toFixed(0)} ms, ${res.fails} failed\n`);
      }
    }
  }
} finally {
  await agentd.stop();
  pg.stop();
  rmSync(tmp, { recursive: true, force: true });
}

const fmt = (ms) => (Number.isNaN(ms) ? "-" : ms >= 100 ? Math.round(ms).toLocaleString("en-US") : ms.toFixed(ms >= 10 ? 1 : 2));
const lines = [];
lines.push(`| case (${graphs} graphs at once) | ${names.join(" | ")} |`);
lines.push(`|---|${names.map(() => "---").join("|")}|`);
for (const [k, by] of results) {
  const pgMedian = median(by.get("PostgresSaver").times);
  lines.push(`| ${k}: time per graph (x PostgresSaver) | ${names.map((n) => `${fmt(median(by.get(n).times))} ms (${(median(by.get(n).times) / pgMedian).toFixed(2)}x)`).join(" | ")} |`);
  lines.push(`| ${k}: failed graphs | ${names.map((n) => `${by.get(n).fails} of ${graphs * rounds}`).join(" | ")} |`);
  for (const op of ["put", "putWrites", "getTuple", "list"]) {
    lines.push(`| ${k}: \`${op}\` p50 / p99 | ${names.map((n) => `${fmt(pct(by.get(n).ops[op], 50))} / ${fmt(pct(by.get(n).ops[op], 99))} ms`).join(" | ")} |`);
  }
}
console.log(lines.join("\n"));
for (const [k, by] of results) for (const [n, res] of by) for (const e of res.errors) console.error(`${k} ${n}: ${e}`);
