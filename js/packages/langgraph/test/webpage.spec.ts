// The web page of a real agentd (agentd/webui, route "#/t/<id>") in
// headless Chromium (playwright-core with the system's browser, never a
// downloaded one) shows a real @langchain/langgraph graph's conversation,
// stored by ConvlogSaver with its default messagesAs ("checkpoint"), live
// while the graph runs and again after a reload: the user message, the
// assistant's tool call, its result, the answer.
import { afterAll, beforeAll, describe, it } from "vitest";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { chromium, type Browser, type Page } from "playwright-core";
import { ConvlogClient } from "@convlog/client";
import { startAgentd, keys, type Agentd } from "@convlog/testing";
import { ConvlogSaver } from "../src/index.js";

const chromiumPath = process.env.CONVLOG_CHROMIUM ?? "/usr/bin/chromium";

let agentd: Agentd;
let browser: Browser;

beforeAll(async () => {
  agentd = await startAgentd();
  browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
});
afterAll(async () => {
  await browser?.close();
  await agentd?.stop();
});

/** A promise and the function that resolves it. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

/** What the page's transcript shows: per message its role, text, and its tool calls with their state and result text. */
function transcript(page: Page) {
  return page.evaluate(() =>
    [...document.querySelectorAll("#transcript > li.msg")].map((li) => ({
      role: (li as HTMLElement).dataset.role,
      text: li.querySelector(".msg-body")?.textContent?.trim() ?? "",
      calls: [...li.querySelectorAll("li.tool-call")].map((c) => ({
        id: (c as HTMLElement).dataset.callId,
        name: c.querySelector(".tool-name")?.textContent,
        state: ["ok", "error", "pending", "missing"].find((s) => c.classList.contains(s)),
        result: c.querySelector(".tool-result")?.textContent ?? "",
      })),
    })),
  );
}

type Shown = Awaited<ReturnType<typeof transcript>>;

/** Polls the page until pred holds for its transcript (30 s at most); fails with the last transcript seen. */
async function until(page: Page, what: string, pred: (t: Shown) => boolean): Promise<Shown> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const last = await transcript(page);
    if (pred(last)) return last;
    if (Date.now() > deadline) throw new Error(`the page does not show ${what}; it shows ${JSON.stringify(last)}`);
    await page.waitForTimeout(100);
  }
}

describe("the web page of a LangGraph thread", () => {
  it("shows the graph's messages live while it runs, and after a reload", async () => {
    const client = new ConvlogClient({ baseUrl: agentd.url, apiKey: keys.acme });
    const toolMayRun = gate();
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("model", (state: typeof MessagesAnnotation.State) => {
        const last = state.messages[state.messages.length - 1];
        if (last instanceof ToolMessage) return { messages: [new AIMessage({ content: `It is ${last.content} in Oslo.` })] };
        return { messages: [new AIMessage({ content: "Let me look.", tool_calls: [{ id: "call_w1", name: "weather", args: { city: "Oslo" } }] })] };
      })
      .addNode("tools", async (state: typeof MessagesAnnotation.State) => {
        // The tool runs when the page has shown its call as pending.
        await toolMayRun.wait;
        const call = (state.messages[state.messages.length - 1] as AIMessage).tool_calls![0];
        return { messages: [new ToolMessage({ content: "sunny", tool_call_id: call.id!, name: call.name })] };
      })
      .addEdge(START, "model")
      .addConditionalEdges("model", (s) => ((s.messages[s.messages.length - 1] as AIMessage).tool_calls?.length ? "tools" : END))
      .addEdge("tools", "model")
      .compile({ checkpointer: new ConvlogSaver({ client }) });
    const thread_id = `lg-web-${Date.now()}`;
    // The thread exists before the page opens, as the saver creates it.
    await client.ensureThread(thread_id, { replies: "off", pending_policy: "cancel", metadata: { source: "langgraph" } });

    const ctx = await browser.newContext();
    try {
      await ctx.addInitScript((key) => sessionStorage.setItem("convlog.apiKey", key), keys.acme);
      const page = await ctx.newPage();
      await page.goto(`${agentd.url}/#/t/${encodeURIComponent(thread_id)}`);
      // The page follows the thread's events (its SSE stream is open).
      await page.waitForSelector("#conn-status.open", { timeout: 30_000 });

      const run = graph.invoke({ messages: [new HumanMessage("Weather in Oslo?")] }, { configurable: { thread_id } });
      try {
        // Live: the question and the assistant's call, its result still to come.
        await until(
          page,
          "the user message and the pending tool call",
          (t) =>
            t.length === 2 &&
            t[0].role === "user" &&
            t[0].text === "Weather in Oslo?" &&
            t[1].role === "assistant" &&
            t[1].text === "Let me look." &&
            t[1].calls.length === 1 &&
            t[1].calls[0].id === "call_w1" &&
            t[1].calls[0].name === "weather" &&
            t[1].calls[0].state === "pending",
        );
      } finally {
        toolMayRun.open();
      }
      await run;

      const want = (t: Shown) =>
        t.length === 3 &&
        t[0].role === "user" &&
        t[0].text === "Weather in Oslo?" &&
        t[1].role === "assistant" &&
        t[1].calls.length === 1 &&
        t[1].calls[0].id === "call_w1" &&
        t[1].calls[0].state === "ok" &&
        t[1].calls[0].result.includes("sunny") &&
        t[2].role === "assistant" &&
        t[2].text === "It is sunny in Oslo.";
      // Live: the tool's result under its call, then the answer.
      await until(page, "the tool result and the answer", want);

      // After a reload, from the stored thread alone.
      await page.reload();
      await until(page, "the whole conversation after a reload", want);
    } finally {
      await ctx.close();
    }
  });
});
