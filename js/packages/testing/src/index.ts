/**
 * @convlog/testing (private): starts a real `agentd serve` built from this
 * repository for the packages' tests: an embedded JetStream in a temporary
 * data directory, the offline agent "demo", API keys for two tenants
 * ({@link keys}), on a free loopback port.
 *
 * @packageDocumentation
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (js/packages/testing/dist/src -> ../../../../..). */
const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../../../..");

/** The API keys of the tenants acme and globex. */
export const keys = { acme: "sk-acme-0123456789", globex: "sk-globex-0123456789" };

/** A running agentd: its base URL, and stop (SIGTERM, then the data directory is removed). */
export interface Agentd {
  url: string;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

let binary: string | undefined;

/** Builds agentd once per test process (go build), into a temporary directory. */
function build(): string {
  if (!binary) {
    const dir = mkdtempSync(join(tmpdir(), "convlog-js-bin-"));
    binary = join(dir, "agentd");
    execFileSync("go", ["build", "-o", binary, "./agentd"], { cwd: repo, stdio: "inherit" });
  }
  return binary;
}

/** Starts agentd serve and waits until /healthz answers 200 (30 s at most). */
export async function startAgentd(extraArgs: string[] = []): Promise<Agentd> {
  const bin = build();
  const data = mkdtempSync(join(tmpdir(), "convlog-js-data-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(bin, ["serve", "--data-dir", data, "--http-addr", `127.0.0.1:${port}`, ...extraArgs], {
    env: { ...process.env, CONVLOG_API_KEYS: `acme:${keys.acme},globex:${keys.globex}`, CONVLOG_LOG_LEVEL: "warn" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  let exited = false;
  child.once("exit", () => (exited = true));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited) throw new Error(`agentd serve exited before it was ready (see its stderr above)`);
    try {
      const r = await fetch(`${url}/healthz`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error("agentd serve was not ready within 30 s");
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    stop: () =>
      new Promise<void>((res) => {
        if (exited) {
          rmSync(data, { recursive: true, force: true });
          return res();
        }
        child.once("exit", () => {
          rmSync(data, { recursive: true, force: true });
          res();
        });
        child.kill("SIGTERM");
      }),
  };
}
