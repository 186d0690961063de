package webui_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// importLike creates an untitled, agentless thread with the metadata
// `agentd import` writes, a user message and an answer in markdown. Its
// events are interleaved with another thread's, so its sequences skip.
func importLike(t *testing.T, s *stack) string {
	t.Helper()
	ctx := t.Context()
	create := func(tc events.ThreadCreated) (string, uint64) {
		_, id, v, err := s.c.CreateThread(ctx, client.CreateOptions{ThreadCreated: tc})
		require.NoError(t, err)
		return id, v
	}
	id, v := create(events.ThreadCreated{Replies: events.RepliesOff, Metadata: map[string]string{
		"source":      "sierra-research/tau-bench:historical_trajectories/gpt-4o-airline.json",
		"source_id":   "gpt-4o-airline/task3/trial0",
		"source_meta": `{"model": "gpt-4o", "domain": "airline", "task_id": 3, "trial": 0, "reward": 0.0}`,
	}})
	other, ov := create(events.ThreadCreated{Title: "Another thread", Replies: events.RepliesOff})
	answer := "Here is your booking:\n\n- **Reservation ID**: `OBUT9V`\n- *Cabin*: economy\n\n" +
		`<img src=x onerror="window.__xss=1"> [docs](https://example.com/a) [bad](javascript:window.__xss=1)`
	for _, p := range []events.Payload{
		events.UserMessage{Content: events.Text("I need to change my flight back from Denver.\nThe quickest one, please.")},
		events.AssistantMessage{Content: events.Text(answer)},
		events.UserMessage{Content: events.Text("Thanks!")},
	} {
		r, err := s.c.Append(ctx, "default", id, []events.Event{{Producer: "agentd-cli", Payload: p}}, client.ExpectVersion(v))
		require.NoError(t, err)
		v = r.Version
		r, err = s.c.Append(ctx, "default", other, []events.Event{{Producer: "seed", Payload: events.UserMessage{Content: events.Text("meanwhile")}}},
			client.ExpectVersion(ov))
		require.NoError(t, err)
		ov = r.Version
	}
	return id
}

// An imported thread reads well: its title is the first user message (the
// list, without messages, names it by its source), ids are shortened with
// the full id on hover, markdown is rendered without running any HTML, the
// audit log says why sequences skip, the title has no focus ring, and at
// 390 px the list scrolls sideways and the composer covers nothing.
func TestViewerImportedThread(t *testing.T) {
	s := newStack(t, stackConfig{})
	id := importLike(t, s)
	b := newBrowser(t, s.srv.URL)

	b.navigate("/")
	row := fmt.Sprintf(`document.querySelector('#thread-list tr[data-thread="%s"]')`, id)
	b.waitFor("the imported thread in the list", row)
	require.Equal(t, "gpt-4o-airline/task3/trial0", eval[string](b, row+`.querySelector("td.title a").textContent`),
		"an untitled thread is named by its source_id")
	require.Equal(t, []string{id[:8] + "…" + id[len(id)-4:], id}, eval[[]string](b,
		`(() => { const e = `+row+`.querySelector(".thread-id"); return [e.textContent, e.title]; })()`))
	notes := eval[string](b, row+`.querySelector("div.notes").textContent`)
	require.Contains(t, notes, "source=sierra-research")
	require.NotContains(t, notes, "source_meta", "the import's JSON is in the source badge's tooltip, not a note")
	require.Equal(t, "none", eval[string](b, `getComputedStyle(document.querySelector("h1")).outlineStyle`),
		"the focused title shows no focus ring")

	// At 390 px the table scrolls inside its wrapper; the page does not.
	b.do(chromedp.EmulateViewport(390, 844))
	b.waitFor("the list's table to scroll sideways in its wrapper", `(() => {
  const w = document.getElementById("thread-list-wrap");
  return getComputedStyle(w).overflowX === "auto" && w.scrollWidth > w.clientWidth && document.documentElement.scrollWidth <= 390;
})()`)
	b.checkAccessible("the list at 390 px")
	b.screenshot("webui-390.png", false)

	// The thread, at 390 px: the composer, fixed to the bottom, leaves the
	// end of the transcript visible.
	b.navigate("/#/t/" + id)
	b.waitFor("the transcript", msgCountJS+` === 3`)
	b.waitFor("the last message above the composer when scrolled to the end", `(() => {
  window.scrollTo(0, document.documentElement.scrollHeight);
  const last = [...document.querySelectorAll("#transcript > li")].pop().getBoundingClientRect();
  const c = document.getElementById("composer").getBoundingClientRect();
  return getComputedStyle(document.getElementById("composer")).position === "fixed" && last.bottom <= c.top;
})()`)

	// At 1280 px: the title and the markdown.
	b.do(chromedp.EmulateViewport(1280, 900))
	b.navigate("/#/t/" + id + "?audit=1")
	b.waitFor("the transcript", msgCountJS+` === 3`)
	require.Equal(t, "I need to change my flight back from Denver.", eval[string](b, `document.querySelector("h1").textContent`))
	require.Equal(t, "none", eval[string](b, `getComputedStyle(document.querySelector("h1")).outlineStyle`))
	md := `document.querySelector('#transcript li.msg.assistant .msg-body')`
	require.Equal(t, []string{"Reservation ID", "OBUT9V", "Cabin"}, eval[[]string](b,
		`[...`+md+`.querySelectorAll("strong, code, em")].map((e) => e.textContent)`))
	require.Equal(t, []string{"https://example.com/a"}, eval[[]string](b, `[...`+md+`.querySelectorAll("a")].map((a) => a.href)`),
		"only http(s) links become links")
	require.Zero(t, eval[int](b, `document.querySelectorAll("#transcript img").length + (window.__xss || 0)`), "HTML in a message is text")
	require.Contains(t, eval[string](b, md+`.textContent`), `<img src=x onerror="window.__xss=1">`)

	// The audit log explains why its sequences skip, and they do.
	b.waitFor("the event log", `document.querySelectorAll("#event-log tbody tr").length === 4`)
	require.Contains(t, eval[string](b, `document.getElementById("seq-note").textContent`), "other threads' events")
	seqs := eval[[]int](b, `[...document.querySelectorAll("#event-log tbody tr")].map((r) => Number(r.dataset.seq))`)
	require.Greater(t, seqs[2]-seqs[1], 1, "the other thread's events sit between this one's: %v", seqs)
	b.checkAccessible("an imported thread in audit mode")
	eval[bool](b, `(() => { window.scrollTo(0, 0); return true; })()`)
	b.screenshot("webui-imported.png", false)
	require.False(t, strings.Contains(eval[string](b, `document.title`), id), "the tab names the thread by its title")
}
