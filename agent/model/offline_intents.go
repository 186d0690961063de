package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/convlog/convlog/events"
)

var (
	rememberRe = regexp.MustCompile(`(?is)^(?:please\s+)?remember\s+(?:that\s+)?(.+?)\s*(?:\s(?:is|are)\s|=)\s*(.+)$`)
	timeRe     = regexp.MustCompile(`(?i)\b(?:what time|what's the time|whats the time|what is the time|current time|time is it|time now|the date|today's date|what day)\b`)
	arithRe    = regexp.MustCompile(`[-+*/().\d\s]*\d[-+*/().\d\s]*`)
	binaryOpRe = regexp.MustCompile(`[\d).]\s*[-+*/]\s*[-+\d(.]`)
	whatRe     = regexp.MustCompile(`(?is)^(?:what|who)(?:'s|\s+is|\s+are)\s+(.+)$`)
	useRe      = regexp.MustCompile(`(?i)^(?:please\s+)?(?:use|call|run)\s+(?:the\s+)?([A-Za-z0-9_.-]+)(?:\s+tool)?$`)
)

// maxKeyLen is the longest state key the offline model uses (the events
// limit for names and keys).
const maxKeyLen = 256

// userIntents turns the text of a user message into tool calls (without
// ids) for the offered tools, and the reasoning for each.
func userIntents(text string, has map[string]bool) (calls []events.ToolCall, why []string) {
	for _, cl := range clauses(text) {
		c, w, ok := clauseIntent(cl, has)
		if ok {
			calls = append(calls, c)
			why = append(why, w)
		}
	}
	return calls, why
}

func clauseIntent(cl string, has map[string]bool) (events.ToolCall, string, bool) {
	if m := useRe.FindStringSubmatch(strings.TrimSpace(cl)); m != nil && has[m[1]] {
		return events.ToolCall{Name: m[1], Arguments: "{}"},
			fmt.Sprintf("The user asked me to use %s, so I call it.", m[1]), true
	}
	if m := rememberRe.FindStringSubmatch(cl); m != nil {
		key, val := normKey(m[1]), trimValue(m[2])
		if has[ToolKVSet] && key != "" && val != "" {
			return events.ToolCall{Name: ToolKVSet, Arguments: jsonArgs(map[string]any{"key": key, "value": val})},
				fmt.Sprintf("The user asked me to remember %q, so I call %s.", key, ToolKVSet), true
		}
		return events.ToolCall{}, "", false
	}
	if timeRe.MatchString(cl) {
		if has[ToolClock] {
			return events.ToolCall{Name: ToolClock, Arguments: "{}"},
				fmt.Sprintf("The user asked for the time, so I call %s.", ToolClock), true
		}
		return events.ToolCall{}, "", false
	}
	for _, m := range arithRe.FindAllString(cl, -1) {
		expr := strings.TrimSpace(m)
		if binaryOpRe.MatchString(expr) {
			if has[ToolCalculator] {
				return events.ToolCall{Name: ToolCalculator, Arguments: jsonArgs(map[string]any{"expression": expr})},
					fmt.Sprintf("The user asked me to compute %s, so I call %s.", expr, ToolCalculator), true
			}
			return events.ToolCall{}, "", false
		}
	}
	if m := whatRe.FindStringSubmatch(cl); m != nil {
		key := normKey(m[1])
		if has[ToolKVGet] && key != "" {
			return events.ToolCall{Name: ToolKVGet, Arguments: jsonArgs(map[string]any{"key": key})},
				fmt.Sprintf("The user asked about %q, so I call %s to look it up.", key, ToolKVGet), true
		}
	}
	return events.ToolCall{}, "", false
}

// clauses splits text at '?', '!', ';', newlines and at '.' followed by a
// space or the end (so "1.5" stays whole).
func clauses(text string) []string {
	var out []string
	start := 0
	flush := func(end int) {
		if s := strings.TrimSpace(text[start:end]); s != "" {
			out = append(out, s)
		}
	}
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '?', '!', ';', '\n':
			flush(i)
			start = i + 1
		case '.':
			if i+1 == len(text) || text[i+1] == ' ' || text[i+1] == '\t' || text[i+1] == '\r' {
				flush(i)
				start = i + 1
			}
		}
	}
	flush(len(text))
	return out
}

const trimSet = " \t\r\n\"'`.,:!?“”‘’"

// normKey lower-cases s, collapses spaces and trims quotes and punctuation;
// it returns "" for keys longer than maxKeyLen.
func normKey(s string) string {
	k := strings.Trim(strings.Join(strings.Fields(strings.ToLower(s)), " "), trimSet)
	if len(k) > maxKeyLen {
		return ""
	}
	return k
}

func trimValue(s string) string {
	return strings.Trim(strings.Join(strings.Fields(s), " "), trimSet)
}

// jsonArgs encodes v with sorted keys and without HTML escaping.
func jsonArgs(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // maps of strings always encode
	return strings.TrimRight(b.String(), "\n")
}

// answerResults writes the text answer to the last assistant turn of msgs
// from the tool results that follow it.
func answerResults(msgs []events.Message) string {
	a := len(msgs) - 1
	for a >= 0 && msgs[a].Role != events.RoleAssistant {
		a--
	}
	if a < 0 {
		return "I have tool results but no tool calls to match them to."
	}
	used := make([]bool, len(msgs))
	var parts []string
	for _, c := range msgs[a].ToolCalls {
		var res *events.Message
		for j := a + 1; j < len(msgs); j++ {
			if !used[j] && msgs[j].Role == events.RoleTool && msgs[j].ToolCallID == c.ID {
				used[j] = true
				res = &msgs[j]
				break
			}
		}
		parts = append(parts, sentence(c, res))
	}
	if len(parts) == 0 {
		return "There is nothing to answer."
	}
	return strings.Join(parts, " ")
}

// sentence says what one call's result means.
func sentence(c events.ToolCall, res *events.Message) string {
	if res == nil {
		return fmt.Sprintf("The %s tool has not answered yet.", c.Name)
	}
	out := strings.TrimSpace(res.Content.String())
	if res.IsError {
		return fmt.Sprintf("The %s tool failed: %s.", c.Name, strings.TrimRight(out, "."))
	}
	var args struct {
		Expression string          `json:"expression"`
		Key        string          `json:"key"`
		Value      json.RawMessage `json:"value"`
	}
	_ = json.Unmarshal([]byte(c.Arguments), &args) // missing fields stay empty
	switch c.Name {
	case ToolClock:
		return fmt.Sprintf("The current time is %s.", out)
	case ToolCalculator:
		return fmt.Sprintf("%s = %s.", args.Expression, out)
	case ToolKVSet:
		return fmt.Sprintf("Noted: %s is %s.", args.Key, display(args.Value))
	case ToolKVGet:
		var got struct {
			Key   string          `json:"key"`
			Found bool            `json:"found"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			return fmt.Sprintf("%s: %s.", args.Key, out)
		}
		if !got.Found {
			return fmt.Sprintf("I don't know what %s is yet. Tell me with \"remember %s is ...\".", args.Key, args.Key)
		}
		return fmt.Sprintf("%s is %s.", upperFirst(args.Key), display(got.Value))
	}
	return fmt.Sprintf("The %s tool returned %s.", c.Name, out)
}

// display shows a JSON value: a string as its text, anything else as JSON.
func display(v json.RawMessage) string {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s
	}
	if len(v) == 0 {
		return "null"
	}
	return string(v)
}

func upperFirst(s string) string {
	for i, r := range s {
		return string(unicode.ToUpper(r)) + s[i+len(string(r)):]
	}
	return s
}
