package chat

import (
	"encoding/json"
	"strings"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// History matching: OpenAI-compatible clients
// resend the whole conversation on every turn. The request's messages are
// compared with the thread's history to find what is new. Both sides are
// reduced to the same view (see the package doc, "Divergence policy"):
//
//   - a user message is one item, compared by its text (CRLF as LF,
//     surrounding white space trimmed; non-text parts compared as JSON);
//   - consecutive assistant and tool messages are one "answer block",
//     compared by the text of its assistant contents joined by a blank line
//     (what this API answers with), or by the last assistant content alone.
//     Tool calls and tool results inside a block are not compared: clients
//     keep them in different shapes (the SDK's stream accumulator merges
//     the tool-call steps into the answer message; others drop them).

// viewItem is one item of a history view.
type viewItem struct {
	user bool
	// text is the user message's text or the block's joined content.
	text string
	// last is the block's last non-empty assistant content.
	last string
	// msgs are the messages of the item, first (index in the source) at from.
	msgs []events.Message
	from int
}

// normText is the comparable text of a content.
func normText(c events.Content) string {
	var s string
	switch c.Kind {
	case events.ContentText:
		s = c.Text
	case events.ContentParts:
		allText := true
		for _, p := range c.Parts {
			if p.Type != events.PartText {
				allText = false
			}
		}
		if allText {
			s = c.String()
		} else {
			b, _ := json.Marshal(c.Parts)
			s = string(b)
		}
	}
	return strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
}

// blockText joins the contents of a block's assistant messages the way the
// answer is built: non-empty contents separated by a blank line.
func blockText(msgs []events.Message) (joined, last string) {
	var parts []string
	for _, m := range msgs {
		if m.Role != events.RoleAssistant {
			continue
		}
		if t := m.Content.String(); strings.TrimSpace(t) != "" {
			parts = append(parts, t)
			last = t
		}
	}
	norm := func(s string) string { return strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n")) }
	return norm(strings.Join(parts, "\n\n")), norm(last)
}

// viewOf reduces a history to its view. System messages are their own
// (user-less) items and never match a user item.
func viewOf(msgs []events.Message) []viewItem {
	var out []viewItem
	for i := 0; i < len(msgs); {
		m := msgs[i]
		if m.Role == events.RoleUser || m.Role == events.RoleSystem {
			out = append(out, viewItem{user: m.Role == events.RoleUser, text: normText(m.Content), msgs: msgs[i : i+1], from: i})
			if m.Role == events.RoleSystem {
				out[len(out)-1].text = "\x00system\x00" + out[len(out)-1].text
			}
			i++
			continue
		}
		j := i
		for j < len(msgs) && (msgs[j].Role == events.RoleAssistant || msgs[j].Role == events.RoleTool) {
			j++
		}
		it := viewItem{msgs: msgs[i:j], from: i}
		it.text, it.last = blockText(it.msgs)
		out = append(out, it)
		i = j
	}
	return out
}

func sameItem(thread, req viewItem) bool {
	if thread.user != req.user {
		return false
	}
	if thread.user {
		return thread.text == req.text
	}
	return req.text == thread.text || (req.text != "" && req.text == thread.last)
}

// matchKind is the outcome of matching a request against a thread.
type matchKind int

const (
	// matchAppend: the thread's history is a prefix of the request; the
	// request's suffix (possibly empty) is new.
	matchAppend matchKind = iota
	// matchReplay: the request is the thread's history up to a user message
	// that the thread already answers (a retry): answer with that answer.
	matchReplay
	// matchDelta: the request holds only user messages that do not continue
	// the history: the client sends just the new message (Agenticore's curl
	// example); they are appended.
	matchDelta
	// matchDiverged: the request's history differs from the thread's.
	matchDiverged
)

// match compares a thread's view with a request's view. For matchAppend,
// n is how many request items the thread already has; for matchReplay, n is
// the index in the thread view of the user item being retried; for
// matchDiverged, n is the first request item that differs (len(req) when
// the request stops short).
func match(thread, req []viewItem) (kind matchKind, n int) {
	i := 0
	for i < len(thread) && i < len(req) && sameItem(thread[i], req[i]) {
		i++
	}
	onlyUsers := len(req) > 0
	for _, it := range req {
		if !it.user {
			onlyUsers = false
		}
	}
	switch {
	case i == len(thread):
		return matchAppend, i
	case len(req) > 0 && i == len(req) && req[i-1].user && len(thread) == len(req)+1 && !thread[i].user:
		return matchReplay, i - 1
	case onlyUsers:
		return matchDelta, 0
	}
	return matchDiverged, i
}

// pendingResults are the indexes, in the request's messages, of the tool
// results in the answer block it for the pending calls (the first result
// of each call): the client ran those tools.
func pendingResults(it viewItem, pending []client.PendingCall) []int {
	want := map[string]bool{}
	for _, pc := range pending {
		want[pc.ID] = true
	}
	var out []int
	for j, m := range it.msgs {
		if m.Role == events.RoleTool && want[m.ToolCallID] {
			out = append(out, it.from+j)
			delete(want, m.ToolCallID)
		}
	}
	return out
}

// currentFirstMatch is how a request in the current-first order relates to
// the thread (see currentFirst).
type currentFirstMatch struct {
	// kind is matchAppend (the first message is new, or results holds the
	// client's tool results for the pending calls of stored's answer),
	// matchDelta (the first message is the thread's last message, not
	// answered yet) or matchReplay (it is the thread's last user message,
	// answered: stored is that message).
	kind    matchKind
	stored  viewItem
	results []int
}

// currentFirst recognises the order AgentKit 0.13 sends:
// [system, current user message, ...history]. The request's first item is
// a user message and the rest is the thread's history (rule 5 of the
// divergence policy): the history is the whole thread (the first message
// is new), or the thread goes on with that very user message (a retry),
// and, if the thread answered it, with nothing but the answer. Anything
// else is not this order.
//
// When the thread's answer ends in calls still pending, the request's
// last answer block holds the history's last answer block and this turn's
// answer so far as one (a tool-call step has no text, so the two read as
// the history's block): tool results in it for the pending calls are new
// (the client ran the tools), as in rule 1, and the request is not a
// retry.
func currentFirst(thread, req []viewItem, pending []client.PendingCall) (currentFirstMatch, bool) {
	if len(req) < 2 || !req[0].user || len(req[0].msgs) != 1 {
		return currentFirstMatch{}, false
	}
	rest := req[1:]
	i := 0
	for i < len(thread) && i < len(rest) && sameItem(thread[i], rest[i]) {
		i++
	}
	if i != len(rest) {
		return currentFirstMatch{}, false
	}
	switch tail := thread[i:]; {
	case len(tail) == 0:
		return currentFirstMatch{kind: matchAppend}, true
	case len(tail) == 1 && sameItem(tail[0], req[0]):
		return currentFirstMatch{kind: matchDelta}, true
	case len(tail) == 2 && sameItem(tail[0], req[0]) && !tail[1].user:
		if last := rest[len(rest)-1]; !last.user && len(pending) > 0 {
			if r := pendingResults(last, pending); len(r) > 0 {
				return currentFirstMatch{kind: matchAppend, stored: tail[0], results: r}, true
			}
		}
		return currentFirstMatch{kind: matchReplay, stored: tail[0]}, true
	}
	return currentFirstMatch{}, false
}
