import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { ConvlogError, type StoredEvent, type ConvlogClient as CoreClient } from "../src/index.js";
import { startAgentd, keys, type Agentd } from "@convlog/testing";

/**
 * The client's behaviour against a real agentd, run by client.test.ts with
 * the core's client (the global fetch) and by node.test.ts with the Node
 * entry's (nodeFetch): the same assertions hold for both transports.
 */
export function clientSuite(ConvlogClient: typeof CoreClient): void {
  let agentd: Agentd;
  before(async () => {
    agentd = await startAgentd();
  });
  after(async () => {
    await agentd?.stop();
  });

  const user = (text: string) => ({ type: "message.user" as const, payload: { content: text } });

  test("threads are created, ensured, read, listed and appended to, with typed errors", async () => {
    const c = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
    const created = await c.createThread({ title: "js", agent: "demo", replies: "off" });
    assert.equal(created.tenant, "acme");
    assert.equal(created.title, "js");
    assert.equal(created.version, 1);

    const first = await c.ensureThread("js-run-1", { title: "first" });
    assert.equal(first.created, true);
    const again = await c.ensureThread("js-run-1", { title: "second" });
    assert.equal(again.created, false);
    assert.equal(again.thread.title, "first", "an existing thread is returned as it is");

    const res = await c.append(created.thread, [user("hello"), user("again")], { expectVersion: 1 });
    assert.equal(res.events.length, 2);
    assert.equal(res.duplicate, false);
    const th = await c.getThread(created.thread, { consistent: true });
    assert.deepEqual(th.messages?.map((m) => m.content), ["hello", "again"]);

    await assert.rejects(c.append(created.thread, [user("late")], { expectVersion: 1 }), (err: unknown) => {
      assert.ok(err instanceof ConvlogError);
      assert.equal(err.status, 412);
      assert.equal(err.problem.code, "version-conflict");
      assert.equal(err.problem.current_version, res.version);
      return true;
    });
    const retry = await c.append(created.thread, [user("once")], { idempotencyKey: "k-1" });
    const dup = await c.append(created.thread, [user("once")], { idempotencyKey: "k-1" });
    assert.equal(dup.duplicate, true, "a retry with the same Idempotency-Key stores nothing twice");
    assert.equal(dup.version, retry.version);

    const page = await c.listThreads({ limit: 10 });
    assert.ok(page.threads.some((t) => t.thread === created.thread));

    await assert.rejects(c.getThread("no-such-thread"), (err: unknown) => err instanceof ConvlogError && err.status === 404 && err.problem.code === "not-found");
    const other = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.globex });
    await assert.rejects(other.getThread(created.thread), (err: unknown) => err instanceof ConvlogError && err.status === 404, "another tenant's thread is not found");
    const anon = new ConvlogClient({ baseUrl: agentd.url });
    await assert.rejects(anon.listThreads(), (err: unknown) => err instanceof ConvlogError && err.status === 401);
    await assert.rejects(c.append(created.thread, [{ type: "message.user", payload: { content: "x", bogus: 1 } }]), (err: unknown) => {
      assert.ok(err instanceof ConvlogError);
      assert.equal(err.status, 422);
      assert.equal(err.problem.field, "events[0].payload.bogus");
      return true;
    });
  });

  test("the thread's key-value state is read by key or prefix and set once with ifAbsent", async () => {
    const c = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
    const th = await c.createThread({ replies: "off" });
    assert.equal(await c.getStateKey(th.thread, "ckpt/1"), undefined);
    const v1 = await c.setStateKey(th.thread, "ckpt/1", { step: 1 }, { ifAbsent: true });
    await assert.rejects(c.setStateKey(th.thread, "ckpt/1", { step: 2 }, { ifAbsent: true }), (err: unknown) => {
      assert.ok(err instanceof ConvlogError);
      assert.equal(err.status, 412);
      assert.equal(err.problem.code, "state-key-exists");
      return true;
    });
    const v2 = await c.setStateKey(th.thread, "ckpt/1", { step: 2 }, { expectVersion: v1 });
    await c.setStateKey(th.thread, "other", "x");
    assert.deepEqual(await c.getStateKey(th.thread, "ckpt/1"), { value: { step: 2 }, version: v2 + 1 });
    const st = await c.getState(th.thread, "ckpt/");
    assert.deepEqual(st.kv, { "ckpt/1": { step: 2 } });
  });

  test("events() follows a thread over SSE and resumes after a dropped connection with no gap and no duplicate", async () => {
    // A fetch that lets the test cut the SSE connections it opened.
    const cuts: AbortController[] = [];
    const cutting: typeof fetch = (input, init) => {
      const ac = new AbortController();
      init?.signal?.addEventListener("abort", () => ac.abort());
      if (String(input).endsWith("/events")) cuts.push(ac);
      return fetch(input, { ...init, signal: ac.signal });
    };
    const c = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme, fetch: cutting });
    const th = await c.createThread({ replies: "off" });
    const stop = new AbortController();
    const seen: StoredEvent[] = [];
    const reading = (async () => {
      for await (const ev of c.events(th.thread, { signal: stop.signal, retryMs: 50 })) {
        seen.push(ev);
        if (seen.length === 3) cuts[0].abort(); // drop the first connection mid-stream
        if (seen.length === 7) stop.abort();
      }
    })();
    await c.append(th.thread, [user("1"), user("2")]);
    await c.append(th.thread, [user("3")]);
    await waitFor(() => cuts.length >= 2, "a second SSE connection (the resume)");
    await c.append(th.thread, [user("4"), user("5"), user("6")]);
    await reading;
    const seqs = seen.map((e) => e.seq);
    assert.equal(seen[0].type, "thread.created");
    assert.deepEqual(seen.slice(1).map((e) => (e.payload as { content: string }).content), ["1", "2", "3", "4", "5", "6"]);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "in order");
    assert.equal(new Set(seqs).size, seqs.length, "no duplicate");
  });

  test("events() of a thread that does not exist is a ConvlogError, not a retry loop", async () => {
    const c = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
    await assert.rejects(async () => {
      for await (const _ of c.events("missing-thread", { after: 5 })) {
        // nothing
      }
    }, (err: unknown) => err instanceof ConvlogError && err.status >= 400 && err.status < 500);
  });

  async function waitFor(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!cond()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  test("a thread verifies against the signed audit checkpoints, and a forged anchor fails", async () => {
    const c = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
    const key = await c.auditKey();
    assert.equal(key.algorithm, "Ed25519");
    assert.match(key.public_key, /^[A-Za-z0-9+/]{43}=$/);
    const t = await c.createThread({ replies: "off" });
    await c.append(t.thread, [user("to be proven")]);
    // Checkpoints come about once a second: wait until nothing is unsigned.
    let rep = await c.verifyThread(t.thread);
    for (let i = 0; i < 100 && (rep.unsigned_events ?? 0) > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      rep = await c.verifyThread(t.thread);
    }
    assert.equal(rep.ok, true, JSON.stringify(rep));
    assert.equal(rep.verified_events, 2);
    assert.equal(rep.unsigned_events, 0);
    const anchor = { msg_seq: rep.last_checkpoint!.msg_seq!, hash: rep.last_checkpoint!.hash! };
    assert.equal((await c.verifyThread(t.thread, anchor)).ok, true);
    const forged = await c.verifyThread(t.thread, { ...anchor, hash: "0".repeat(64) });
    assert.equal(forged.ok, false);
    assert.equal(forged.problems?.[0]?.kind, "anchor-not-found");
    assert.equal((await c.verifyTenant()).ok, true);
  });

  test("an event is redacted and a thread erased for good", async () => {
    const c = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
    const t = await c.createThread({ replies: "off" });
    await c.append(t.thread, [user("keep this"), user("my card is 4111 1111")]);
    let th = await c.getThread(t.thread, { consistent: true });
    const seq = th.messages![1]!.seq!;
    const rep = await c.redact(t.thread, seq, { fields: ["content"], reason: "card number" });
    assert.deepEqual(rep.fields, ["content"]);
    assert.equal(rep.seq, seq);
    th = await c.getThread(t.thread, { consistent: true });
    assert.equal(th.messages![0]!.content, "keep this");
    assert.equal(th.messages![1]!.content, "[redacted]");
    assert.equal(th.redactions?.[0]?.reason, "card number");
    await assert.rejects(c.redact(t.thread, 999999), (e: unknown) => e instanceof ConvlogError && e.status === 422);

    const er = await c.eraseThread(t.thread, "asked");
    assert.equal(er.key_destroyed, true);
    await assert.rejects(c.getThread(t.thread), (e: unknown) => e instanceof ConvlogError && e.status === 404);
    await assert.rejects(c.eraseThread(t.thread), (e: unknown) => e instanceof ConvlogError && e.status === 404);
  });

  test("a request that got no answer is sent again only when sending it twice changes nothing", async () => {
    // A fetch in front of agentd whose first `drop` requests get no answer,
    // as fetch reports a connection closed under a request: a TypeError.
    let drop = 0;
    const sent: string[] = [];
    const flaky: typeof fetch = async (input, init) => {
      const req = new Request(input, init);
      sent.push(`${req.method} ${new URL(req.url).pathname}`);
      if (drop > 0) {
        drop--;
        await req.arrayBuffer(); // the body went out; the answer never came
        throw new TypeError("fetch failed");
      }
      return fetch(req);
    };
    const c = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme, fetch: flaky, retry: { attempts: 3, baseMs: 1 } });
    const th = await c.createThread({ replies: "off" });
    const contents = async () => (await c.getThread(th.thread, { consistent: true })).messages?.map((m) => m.content);

    drop = 2;
    sent.length = 0;
    assert.equal((await c.getThread(th.thread)).thread, th.thread);
    assert.equal(sent.length, 3, "a read is sent again");

    // An append whose events carry their ids: the server stores each id once.
    const id = "0195f0a8-8a1e-7000-8000-000000000001";
    drop = 1;
    sent.length = 0;
    const res = await c.append(th.thread, [{ ...user("with id"), id }]);
    assert.equal(sent.length, 2);
    assert.equal(res.events[0].id, id);
    assert.deepEqual(await contents(), ["with id"]);

    // A dropped request that did reach the server: the resent append is
    // answered with what was stored, nothing twice.
    const id2 = "0195f0a8-8a1e-7000-8000-000000000002";
    let reached = 0;
    const lost: typeof fetch = async (input, init) => {
      const res = await fetch(new Request(input, init));
      if (reached++ === 0) throw new TypeError("fetch failed"); // stored, but the answer was lost
      return res;
    };
    const c2 = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme, fetch: lost, retry: { attempts: 3, baseMs: 1 } });
    await c2.append(th.thread, [{ ...user("stored once"), id: id2 }]);
    assert.equal(reached, 2);
    assert.deepEqual(await contents(), ["with id", "stored once"]);

    // Without ids, or conditional: whether it ran is unknown, so it is not sent again.
    for (const [events, opts] of [[[user("no id")], {}], [[{ ...user("conditional"), id: "0195f0a8-8a1e-7000-8000-000000000003" }], { expectVersion: 99 }]] as const) {
      drop = 1;
      sent.length = 0;
      await assert.rejects(c.append(th.thread, [...events], opts), (err: unknown) => err instanceof TypeError);
      assert.equal(sent.length, 1, JSON.stringify(events));
    }
    assert.deepEqual(await contents(), ["with id", "stored once"]);

    // Retries off: the error as fetch gave it.
    const plain = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme, fetch: flaky, retry: false });
    drop = 1;
    await assert.rejects(plain.getThread(th.thread), (err: unknown) => err instanceof TypeError);
  });

  test("requests refused for overload (429, 503 with Retry-After) are sent again, honoring Retry-After", async () => {
    // A fetch in front of agentd that refuses the first `refuse` requests as an overloaded server would.
    let refuse = 0;
    let status = 429;
    let retryAfter: string | null = "0";
    const sent: string[] = [];
    const overloaded: typeof fetch = async (input, init) => {
      const req = new Request(input, init);
      sent.push(`${req.method} ${new URL(req.url).pathname}`);
      if (refuse > 0) {
        refuse--;
        const headers: Record<string, string> = { "Content-Type": "application/problem+json" };
        if (retryAfter !== null) headers["Retry-After"] = retryAfter;
        return new Response(JSON.stringify({ type: "about:blank", title: "Overloaded", status, code: "overloaded" }), { status, headers });
      }
      return fetch(req);
    };
    const c = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme, fetch: overloaded, retry: { attempts: 3, baseMs: 1 } });
    const th = await c.createThread({ replies: "off" });

    sent.length = 0;
    refuse = 2;
    const res = await c.append(th.thread, [user("once")]);
    assert.equal(sent.length, 3, "two refusals, then the append");
    assert.equal(res.events.length, 1);
    assert.deepEqual((await c.getThread(th.thread, { consistent: true })).messages?.map((m) => m.content), ["once"]);

    sent.length = 0;
    refuse = 5;
    await assert.rejects(c.getThread(th.thread), (err: unknown) => err instanceof ConvlogError && err.status === 429);
    assert.equal(sent.length, 3, "at most `attempts` requests");

    // A 503 without Retry-After may come from a proxy that cannot say
    // whether the request ran: an append is not sent again, a read is.
    refuse = 1;
    status = 503;
    retryAfter = null;
    sent.length = 0;
    await assert.rejects(c.append(th.thread, [user("maybe")]), (err: unknown) => err instanceof ConvlogError && err.status === 503);
    assert.equal(sent.length, 1);
    refuse = 1;
    sent.length = 0;
    assert.equal((await c.getThread(th.thread)).thread, th.thread);
    assert.equal(sent.length, 2);

    const plain = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme, fetch: overloaded, retry: false });
    refuse = 1;
    status = 429;
    retryAfter = "0";
    await assert.rejects(plain.getThread(th.thread), (err: unknown) => err instanceof ConvlogError && err.status === 429);
  });
}
