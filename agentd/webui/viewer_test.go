package webui_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "save screenshots of the page to docs/ (README)")

// seedThreads creates a few threads for the list, two of them with an
// exchange the demo agent answers.
func seedThreads(t *testing.T, s *stack) {
	t.Helper()
	ctx := t.Context()
	seed := []struct {
		tc   events.ThreadCreated
		text string
	}{
		{events.ThreadCreated{Agent: "demo", Title: "Imported support chat", Owner: "carol",
			Metadata: map[string]string{"source": "import"}, Replies: events.RepliesOff}, "my parcel has not arrived"},
		{events.ThreadCreated{Agent: "demo", Title: "Order #1042: refund", Owner: "alice",
			Metadata: map[string]string{"channel": "email"}}, "what is 19.99*3"},
		{events.ThreadCreated{Agent: "demo", Title: "Remember my plan", Owner: "bob"}, "remember that my plan is pro"},
	}
	for _, sd := range seed {
		_, id, v, err := s.c.CreateThread(ctx, client.CreateOptions{ThreadCreated: sd.tc})
		require.NoError(t, err)
		_, err = s.c.Append(ctx, "default", id, []events.Event{{Producer: "seed", Payload: events.UserMessage{Content: events.Text(sd.text)}}},
			client.ExpectVersion(v))
		require.NoError(t, err)
	}
}

// publishRejected appends, bypassing client/ (which would refuse it), a
// tool result for a call the thread never made: a misbehaving tool runner.
// The projector records it as rejected.
func publishRejected(t *testing.T, s *stack, thread string) uint64 {
	t.Helper()
	ev := events.New("default", thread, "rogue-tool-runner",
		events.ToolResult{ToolCallID: "call_never_made", Name: "clock", Content: events.Text("12:00")})
	subj, err := s.c.Subjects().Thread("default", thread)
	require.NoError(t, err)
	ack, err := s.c.JetStream().PublishMsg(t.Context(), clienttest.Msg(t, subj, ev))
	require.NoError(t, err)
	return ack.Sequence
}

// threadID reads the thread id from the page's location (#/t/{id}?...).
const threadIDJS = `decodeURIComponent(location.hash.replace(/^#\/t\//, "").split("?")[0])`

// msgCountJS counts the transcript's message items (tool results are
// shown inside the assistant message that made the call).
const msgCountJS = `document.querySelectorAll("#transcript li.msg:not(.draft)").length`

// answeredJS is true when the transcript shows a stored assistant turn that
// called tool with a result matching resultRe, followed by an answer that
// contains the result, and nothing is still streaming.
func answeredJS(tool, resultRe string) string {
	return fmt.Sprintf(`(() => {
  if (document.querySelector("#transcript .msg.draft")) return false;
  const call = [...document.querySelectorAll("#transcript li.msg.assistant .tool-call.ok")]
    .find((c) => c.querySelector(".tool-name").textContent === %s);
  if (!call) return false;
  const result = call.querySelector("pre.result").textContent;
  if (!new RegExp(%s).test(result)) return false;
  return [...document.querySelectorAll("#transcript li.msg.assistant .msg-body")].some((b) => b.textContent.includes(result));
})()`, js(tool), js(resultRe))
}

// The page end to end, in headless Chromium against the whole stack: the
// list, a new thread, a message answered with a tool call while tokens
// stream in, a resume after a dropped connection, a reload, audit mode with
// a rejected event, time travel with the keyboard, and fork from there.
func TestViewerEndToEnd(t *testing.T) {
	start := time.Now()
	s := newStack(t, stackConfig{tokenDelay: 25 * time.Millisecond})
	seedThreads(t, s)
	b := newBrowser(t, s.srv.URL)

	// The list, newest first.
	b.navigate("/")
	b.waitFor("the list to show the three seeded threads", `document.querySelectorAll("#thread-list tbody tr").length >= 3`)
	b.waitFor("the demo agent's answers to the seeded threads (refreshing the list)", `(() => {
  const ok = [...document.querySelectorAll("#thread-list tbody td.count")].filter((td) => Number(td.textContent) >= 4).length >= 2;
  if (!ok && !(Date.now() - (window.__refreshed || 0) < 500)) {
    window.__refreshed = Date.now();
    document.getElementById("refresh-list").click();
  }
  return ok;
})()`)
	checkSSEParser(t, b)
	b.checkAccessible("the list")

	// A filter by metadata narrows the list.
	b.typeInto("#f-meta", "channel=email\r")
	b.waitFor("the metadata filter to leave one thread", `location.hash.includes("meta=") && document.querySelectorAll("#thread-list tbody tr").length === 1 &&
		document.querySelector("#thread-list tbody tr a").textContent === "Order #1042: refund"`)
	b.click("#clear-filters")
	b.waitFor("the list without filters", `document.querySelectorAll("#thread-list tbody tr").length >= 3`)

	// New thread, from the agent picker.
	b.click("#new-thread")
	b.waitFor("the agent picker to list demo", `[...document.querySelectorAll("#new-agent option")].some((o) => o.value === "demo")`)
	b.checkAccessible("the list with the new-thread form")
	b.typeInto("#new-title", "What time is it?")
	b.click("#create-thread")
	b.waitFor("the new thread to open with a live stream", `location.hash.startsWith("#/t/") && document.querySelector("#conn-status.open")`)
	id := eval[string](b, threadIDJS)
	t.Logf("thread %s", id)

	// Send a message; record what the transcript shows while it streams.
	eval[bool](b, `(() => {
  window.__partials = new Set();
  new MutationObserver(() => {
    for (const el of document.querySelectorAll("#transcript .msg.draft .msg-body, #transcript .msg.draft .reasoning-text"))
      if (el.textContent) window.__partials.add(el.textContent);
  }).observe(document.getElementById("transcript"), { subtree: true, childList: true, characterData: true });
  return true;
})()`)
	b.typeInto("#composer-text", "what time is it?\r")
	b.waitFor("the answer with the clock tool call and its result", answeredJS("clock", `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`))
	// The drafts showed parts of the answer or of the reasoning before the
	// stored message replaced them.
	partials := eval[[]string](b, `[...window.__partials]`)
	finals := eval[[]string](b, `[...document.querySelectorAll("#transcript li.msg.assistant .msg-body, #transcript li.msg.assistant .reasoning-text")].map((e) => e.textContent)`)
	streamed := 0
	for _, p := range partials {
		for _, f := range finals {
			if len(p) < len(f) && strings.HasPrefix(f, p) {
				streamed++
				break
			}
		}
	}
	require.Positive(t, streamed, "the answer should stream in token by token: the drafts showed %q, the stored texts are %q", partials, finals)
	require.Equal(t, 3, eval[int](b, msgCountJS), "user, assistant with the tool call (and its result), answer")

	// Drop every connection: the stream resumes from the last event it saw.
	version := eval[int](b, `Number(document.getElementById("version").textContent)`)
	s.srv.CloseClientConnections()
	b.waitFor("the resumed-after-disconnect indicator", fmt.Sprintf(
		`document.getElementById("resume-note").textContent.includes("Resumed after disconnect from event %d (Last-Event-ID: %d)") && document.querySelector("#conn-status.open")`, version, version))
	b.typeInto("#composer-text", "what is 6*7\r")
	b.waitFor("the calculator's answer over the resumed stream", answeredJS("calculator", `^42$`))
	require.Equal(t, 6, eval[int](b, msgCountJS))
	b.checkAccessible("a thread")
	// No message twice: the transcript's sequences strictly increase.
	seqs := eval[[]int](b, `[...document.querySelectorAll("#transcript li.msg")].map((li) => Number(li.dataset.seq))`)
	for i := 1; i < len(seqs); i++ {
		require.Greater(t, seqs[i], seqs[i-1], "transcript sequences %v", seqs)
	}
	b.screenshot("webui-thread.png", true)

	// Reload: the same transcript.
	before := eval[string](b, `document.getElementById("transcript").innerText`)
	b.do(chromedp.Reload())
	b.waitFor("the transcript after the reload", msgCountJS+` === 6 && document.querySelector("#conn-status.open")`)
	require.Equal(t, before, eval[string](b, `document.getElementById("transcript").innerText`))

	// A rejected event shows up live, with the fold's reason in audit mode.
	rejSeq := publishRejected(t, s, id)
	b.waitFor("the note that an event was rejected", `!document.querySelector(".reject-note").hidden`)
	b.click("#audit-toggle")
	b.waitFor("the integrity badge: verified", `document.querySelector("#integrity.ok")?.textContent === "Integrity: verified" &&
		/^\d+ event\(s\) match the signed checkpoints/.test(document.getElementById("integrity-detail").textContent)`)
	th, err := s.c.Get(t.Context(), "default", id, client.Consistent(), client.WithEvents())
	require.NoError(t, err)
	require.Len(t, th.Rejections, 1)
	b.waitFor("the event log with every event", fmt.Sprintf(`document.querySelectorAll("#event-log tbody tr:not(.rejection)").length === %d`, len(th.Events)))
	b.waitFor("the rejected event highlighted with its reason", fmt.Sprintf(
		`document.querySelector('#event-log tr.rejected[data-seq="%d"] + tr.rejection .reject-reason.fold')?.textContent.includes(%s)`,
		rejSeq, js(th.Rejections[0].Reason)))
	b.waitFor("the log's columns", fmt.Sprintf(`(() => { const r = document.querySelector('#event-log tr[data-seq="%d"]');
		return r.querySelector("td.producer").textContent === "rogue-tool-runner" && r.querySelector("td.eid").textContent === %s &&
		r.querySelector("td.type code").textContent === "tool.result" && r.querySelector("td.time time"); })()`, rejSeq, js(th.Events[len(th.Events)-1].ID)))

	// Time travel with the keyboard: Home, then right to the second user
	// message. The transcript shows the thread as it was then.
	idx, at := -1, uint64(0)
	users := 0
	for i, ev := range th.Events {
		if ev.Type == events.TypeUserMessage {
			if users++; users == 2 {
				idx, at = i, ev.Seq
			}
		}
	}
	require.Positive(t, idx)
	past, err := s.c.Get(t.Context(), "default", id, client.AtSeq(at))
	require.NoError(t, err)
	want := 0
	for _, m := range past.Messages {
		if m.Role != events.RoleTool {
			want++
		}
	}
	b.do(chromedp.Focus(chromedp.ID("tt-range")))
	b.keys(kb.Home)
	b.keys(strings.Repeat(kb.ArrowRight, idx))
	b.waitFor(fmt.Sprintf("the thread as of seq %d (%d messages)", at, want), fmt.Sprintf(
		`location.hash.endsWith("at=%d") && !document.getElementById("asof-banner").hidden && %s === %d && document.getElementById("composer-text").disabled`,
		at, msgCountJS, want))
	require.Less(t, want, 6, "the past has fewer messages")
	b.waitFor("the log to mark the sequence shown", fmt.Sprintf(`document.querySelector('#event-log tr.selected[data-seq="%d"]') && document.querySelector('#event-log tr.future[data-seq="%d"]')`, at, rejSeq))
	b.checkAccessible("audit mode")
	eval[bool](b, `(() => { window.scrollTo(0, 0); return true; })()`)
	b.screenshot("webui-audit.png", false)

	// Reloading keeps the audit view and the sequence.
	b.do(chromedp.Reload())
	b.waitFor("the same past view after a reload", fmt.Sprintf(`!document.getElementById("asof-banner").hidden && %s === %d && document.querySelector('#event-log tr.selected[data-seq="%d"]')`, msgCountJS, want, at))

	// Fork from there: the fork opens with the history as of that sequence.
	b.click("#fork-here")
	b.waitFor("the fork to open", fmt.Sprintf(`location.hash.startsWith("#/t/") && %s !== %s && document.querySelector(".meta").textContent.includes("forked from %s at seq %d")`,
		threadIDJS, js(id), id, at))
	fork := eval[string](b, threadIDJS)
	ft, err := s.c.Get(t.Context(), "default", fork, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, id, ft.ForkedFrom.Thread)
	require.Equal(t, at, ft.ForkedFrom.Seq)
	b.waitFor("the fork's transcript", fmt.Sprintf(`%s >= %d`, msgCountJS, want))

	// Back to the list: the new thread and its fork are on top.
	b.click(".crumbs a")
	b.waitFor("the list with the fork first", fmt.Sprintf(`(() => {
  const first = document.querySelector("#thread-list tbody tr");
  if (first && first.dataset.thread === %s) return true;
  if (!(Date.now() - (window.__refreshed || 0) < 500)) {
    window.__refreshed = Date.now();
    document.getElementById("refresh-list")?.click();
  }
  return false;
})()`, js(fork)))
	b.screenshot("webui-list.png", false)

	// A fork of the fork, by reference: its page shows the whole lineage,
	// root first, each source with the sequence forked at.
	_, fork2, _, err := s.c.Fork(t.Context(), "default", fork, client.ForkOptions{ByReference: true})
	require.NoError(t, err)
	b.do(chromedp.Navigate(s.srv.URL + "/#/t/" + fork2))
	b.waitFor("the lineage of a fork of a fork", fmt.Sprintf(`(() => {
  const l = document.getElementById("lineage");
  return !!l && !l.hidden && l.textContent.startsWith("Lineage: " + %s + " (seq %d) › " + %s + " (seq ") &&
    l.textContent.includes(", by reference) › ") && l.textContent.endsWith(%s);
})()`, js(id), at, js(fork), js(fork2)))

	// A checkpoint forged behind convlog's back (signed by another key)
	// turns the badge red, naming its sequence.
	_, forger, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	body, sig, pub, err := audit.Sign(audit.Checkpoint{V: audit.CheckpointVersion, Stream: "CONVLOG", From: 1, Seq: 1}, forger)
	require.NoError(t, err)
	ack, err := s.ns.JS.PublishMsg(t.Context(), &nats.Msg{Subject: audit.CheckpointSubject(""), Data: body,
		Header: nats.Header{audit.HeaderSignature: {sig}, audit.HeaderKey: {pub}}})
	require.NoError(t, err)
	b.do(chromedp.Navigate(s.srv.URL + "/#/t/" + id + "?audit=1"))
	b.waitFor("the integrity badge: failed", fmt.Sprintf(`document.querySelector("#integrity.error")?.textContent === "Integrity: FAILED at seq %d" &&
		document.getElementById("integrity-detail").textContent.startsWith("checkpoint-signature")`, ack.Sequence))
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}

// checkSSEParser runs the page's SSE parser (static/js/sse.js) on a stream
// with every line ending, comments, multi-line data, an id carried over and
// a frame cut off, fed in chunks of every size from 1 byte to all of it.
func checkSSEParser(t *testing.T, b *browser) {
	t.Helper()
	got := eval[[]string](b, `(async () => {
  const { SSEParser } = await import("/js/sse.js");
  const text = "\ufeffretry: 1500\r\n: comment\r\nid: 7\r\nevent: message.user\r\ndata: {\"a\":\r\ndata:1}\r\n\r\n" +
    "event: delta\ndata: x\n\nid: 8\rdata: y\r\rid\ndata\n\ndata: cut off";
  const out = new Set();
  for (let size = 1; size <= text.length; size++) {
    const got = [];
    let retry = 0;
    const p = new SSEParser((e) => got.push(e), (ms) => { retry = ms; });
    for (let i = 0; i < text.length; i += size) p.feed(text.slice(i, i + size));
    out.add(JSON.stringify({ got, retry, last: p.lastEventId }));
  }
  return [...out];
})()`)
	require.Equal(t, []string{`{"got":[` +
		`{"type":"message.user","data":"{\"a\":\n1}","lastEventId":"7","hasId":true},` +
		`{"type":"delta","data":"x","lastEventId":"7","hasId":false},` +
		`{"type":"message","data":"y","lastEventId":"8","hasId":true},` +
		`{"type":"message","data":"","lastEventId":"","hasId":true}],"retry":1500,"last":""}`}, got,
		"every chunking gives the same events")
}

// With auth on, the page asks for an API key on the first 401, keeps it in
// sessionStorage, and sends it as a bearer token, also on the event stream
// (read with fetch, since EventSource cannot send the header).
func TestViewerWithAPIKey(t *testing.T) {
	const key = "sk-webui-test-0123456789"
	s := newStack(t, stackConfig{keys: map[string]string{key: "acme"}, tokenDelay: 5 * time.Millisecond})
	b := newBrowser(t, s.srv.URL)

	b.navigate("/")
	b.waitFor("the API key prompt", `document.getElementById("key-dialog").open`)
	b.checkAccessible("the API key prompt")
	b.typeInto("#key-input", key)
	b.click("#key-save")
	b.waitFor("the tenant's (empty) list", `document.getElementById("list-status").textContent.includes("No threads yet")`)
	b.click("#new-thread")
	b.waitFor("the agent picker", `[...document.querySelectorAll("#new-agent option")].some((o) => o.value === "demo")`)
	b.click("#create-thread")
	b.waitFor("the new thread with a live stream", `location.hash.startsWith("#/t/") && document.querySelector("#conn-status.open")`)
	id := eval[string](b, threadIDJS)
	b.typeInto("#composer-text", "what is 6*7\r")
	b.waitFor("the answer streamed with the key", answeredJS("calculator", `^42$`))
	// A failing tool call is marked as an error.
	b.typeInto("#composer-text", "what is 1/0\r")
	b.waitFor("the error result marked", `(() => {
  const c = document.querySelector("#transcript li.msg.assistant .tool-call.error");
  return c && c.querySelector(".badge.error").textContent.includes("error") && c.querySelector("pre.result").textContent.includes("division by zero") &&
    !document.querySelector("#transcript .msg.draft");
})()`)

	// The thread is the key's tenant's.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	th, err := s.c.Get(ctx, "acme", id, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, 8, th.MessageCount(), "twice: user, assistant with the call, tool result, answer")

	// Export downloads with the key (a link alone could not send it).
	exported := eval[string](b, `(async () => {
  const got = {};
  const click = HTMLAnchorElement.prototype.click, objectURL = URL.createObjectURL;
  URL.createObjectURL = (blob) => { got.blob = blob; return objectURL(blob); };
  HTMLAnchorElement.prototype.click = function () {
    if (this.href.startsWith("blob:")) got.name = this.download; // the save, not a navigation
    else click.call(this);
  };
  try {
    document.querySelector('a[href$="export?format=openai"]').click();
    for (let i = 0; i < 200 && !got.name; i++) await new Promise((r) => setTimeout(r, 50));
  } finally {
    HTMLAnchorElement.prototype.click = click;
    URL.createObjectURL = objectURL;
  }
  return got.name ? got.name + "\n" + await got.blob.text() : "no download";
})()`)
	name, line, _ := strings.Cut(exported, "\n")
	require.Equal(t, id+".openai.jsonl", name, exported)
	require.Contains(t, line, `"source":"convlog:acme"`)
	require.Contains(t, line, `{"role":"tool","content":"42"`)

	// The key survives a reload of the tab: no second prompt.
	b.do(chromedp.Reload())
	b.waitFor("the transcript after a reload", msgCountJS+` === 6 && document.querySelector("#conn-status.open")`)
	require.False(t, eval[bool](b, `document.getElementById("key-dialog").open`))
	require.Equal(t, key, eval[string](b, `sessionStorage.getItem("convlog.apiKey")`))
}
