package events_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// mutations returns copies of p with one string (or raw JSON, or time)
// reachable from it made invalid: invalid UTF-8, or a year outside 1..9999.
// Each is named by where it was changed.
func mutations(p events.Payload) map[string]events.Payload {
	out := map[string]events.Payload{}
	root := reflect.ValueOf(p)
	var walk func(path string, get func(reflect.Value) reflect.Value, t reflect.Type)
	// mutate rebuilds a deep copy of p with the value at get changed by set.
	mutate := func(path string, get func(reflect.Value) reflect.Value, set func(reflect.Value)) {
		c := deepCopy(root)
		set(get(c))
		out[path] = c.Interface().(events.Payload)
	}
	walk = func(path string, get func(reflect.Value) reflect.Value, t reflect.Type) {
		v := get(deepCopy(root))
		switch {
		case t == reflect.TypeFor[time.Time]():
			if !v.Interface().(time.Time).IsZero() {
				mutate(path, get, func(x reflect.Value) { x.Set(reflect.ValueOf(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))) })
			}
		case t.Kind() == reflect.String:
			mutate(path, get, func(x reflect.Value) { x.SetString(x.String() + "\xff") })
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
			if v.Len() > 0 {
				mutate(path, get, func(x reflect.Value) { x.SetBytes([]byte("\"\xff\"")) })
			}
		case t.Kind() == reflect.Pointer:
			if !v.IsNil() {
				walk(path, func(r reflect.Value) reflect.Value { return get(r).Elem() }, t.Elem())
			}
		case t.Kind() == reflect.Slice:
			for i := range v.Len() {
				walk(fmt.Sprintf("%s[%d]", path, i), func(r reflect.Value) reflect.Value { return get(r).Index(i) }, t.Elem())
			}
		case t.Kind() == reflect.Map:
			for _, k := range v.MapKeys() {
				bad := reflect.ValueOf(k.String() + "\xff").Convert(t.Key())
				mutate(fmt.Sprintf("%s[%q] key", path, k), get, func(x reflect.Value) {
					val := x.MapIndex(k)
					x.SetMapIndex(k, reflect.Value{})
					x.SetMapIndex(bad, val)
				})
				if t.Elem().Kind() == reflect.String || t.Elem().Kind() == reflect.Slice {
					mutate(fmt.Sprintf("%s[%q]", path, k), get, func(x reflect.Value) {
						if t.Elem().Kind() == reflect.String {
							x.SetMapIndex(k, reflect.ValueOf(x.MapIndex(k).String()+"\xff").Convert(t.Elem()))
						} else {
							x.SetMapIndex(k, reflect.ValueOf([]byte("\"\xff\"")).Convert(t.Elem()))
						}
					})
				}
			}
		case t.Kind() == reflect.Struct:
			for i := range t.NumField() {
				if t.Field(i).IsExported() {
					walk(path+"."+t.Field(i).Name, func(r reflect.Value) reflect.Value { return get(r).Field(i) }, t.Field(i).Type)
				}
			}
		}
	}
	walk("payload", func(r reflect.Value) reflect.Value { return r }, root.Type())
	return out
}

// deepCopy returns an addressable deep copy of v (structs, slices, maps,
// pointers; strings and bytes copied by value).
func deepCopy(v reflect.Value) reflect.Value {
	c := reflect.New(v.Type()).Elem()
	copyInto(c, v)
	return c
}

func copyInto(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if !src.IsNil() {
			p := reflect.New(src.Type().Elem())
			copyInto(p.Elem(), src.Elem())
			dst.Set(p)
		}
	case reflect.Slice:
		if !src.IsNil() {
			s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
			for i := range src.Len() {
				copyInto(s.Index(i), src.Index(i))
			}
			dst.Set(s)
		}
	case reflect.Map:
		if !src.IsNil() {
			m := reflect.MakeMapWithSize(src.Type(), src.Len())
			for it := src.MapRange(); it.Next(); {
				val := reflect.New(src.Type().Elem()).Elem()
				copyInto(val, it.Value())
				m.SetMapIndex(it.Key(), val)
			}
			dst.Set(m)
		}
	case reflect.Struct:
		if src.Type() == reflect.TypeFor[time.Time]() || src.NumField() == 0 {
			dst.Set(src)
			return
		}
		for i := range src.NumField() {
			if src.Type().Field(i).IsExported() {
				copyInto(dst.Field(i), src.Field(i))
			} else {
				dst.Set(src) // unexported state: copy the struct as a whole
				return
			}
		}
	default:
		dst.Set(src)
	}
}

// The fast text check (no paths) must agree with the walk that names the
// field, on every fixture and on every one-field corruption of it.
func TestTextValidAgreesWithValidateText(t *testing.T) {
	cases := 0
	for _, set := range []map[events.Type]events.Event{sampleEvents(), minimalEvents()} {
		for typ, e := range set {
			require.True(t, events.TextValid(e.Payload), "%s", typ)
			require.NoError(t, events.TextError(e.Payload), "%s", typ)
			for where, p := range mutations(e.Payload) {
				cases++
				slow := events.TextError(p)
				require.Equal(t, slow == nil, events.TextValid(p), "%s: %s (slow says %v)", typ, where, slow)
				require.Error(t, slow, "%s: %s: the corruption must be caught", typ, where)
				ev := e
				ev.Payload = p
				require.Error(t, ev.Validate(), "%s: %s", typ, where)
			}
		}
	}
	require.Greater(t, cases, 50, "the fixtures must reach many strings")
}

func TestCanonicalUUIDMatchesUUIDParse(t *testing.T) {
	inputs := []string{
		events.NewID(), uuid.NewString(), "01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b",
		"01959A3C-5E2B-7CC1-9A40-3B1D2E4F5A6B", "{01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b}",
		"urn:uuid:01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b", "01959a3c5e2b7cc19a403b1d2e4f5a6b",
		"01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6", "01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6g",
		"01959a3c_5e2b-7cc1-9a40-3b1d2e4f5a6b", "", "x", "01959a3c-5e2b-7cc1-9a40+3b1d2e4f5a6b",
	}
	for _, s := range inputs {
		u, err := uuid.Parse(s)
		want := err == nil && u.String() == s
		require.Equal(t, want, events.CanonicalUUID(s), "%q", s)
	}
}

func FuzzCanonicalUUID(f *testing.F) {
	f.Add("01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b")
	f.Add("01959A3C-5E2B-7CC1-9A40-3B1D2E4F5A6B")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := uuid.Parse(s)
		require.Equal(t, err == nil && u.String() == s, events.CanonicalUUID(s), "%q", s)
	})
}

// The text check of the common payload types without reflection agrees
// with the reflection walk wherever Validate uses it (after the payload's
// own rules accepted it), on payloads with parts and every field set and
// on every one-field corruption of them, so Validate returns the same
// errors.
func TestTypedTextCheckAgreesWithTheReflectionWalk(t *testing.T) {
	parts := events.Parts(
		events.Part{Type: events.PartText, Text: "a"},
		events.Part{Type: events.PartImage, URL: "https://x/y.png", Detail: "low", Text: "t"},
		events.Part{Type: events.PartImage, Data: "AAE=", MediaType: "image/png", Filename: "f"},
		events.Part{Type: events.PartFile, FileID: "f-1", Filename: "a.pdf", MediaType: "application/pdf", URL: "u"})
	payloads := []events.Payload{
		events.UserMessage{Content: parts, Name: "n", Metadata: json.RawMessage(`{"a":"b"}`)},
		events.AssistantMessage{Content: parts, Reasoning: "r", Agent: "a", Model: "m", Name: "n", ReplyTo: "x",
			ToolCalls: []events.ToolCall{{ID: "c1", Name: "f", Arguments: `{"q":"x"}`}, {ID: "c2", Name: "g", Arguments: `1`}},
			Usage:     &events.Usage{InputTokens: 1}, Metadata: json.RawMessage(`{}`)},
		events.ToolResult{ToolCallID: "c1", Name: "f", Content: parts, IsError: true},
		events.StateSet{Key: "k", Value: json.RawMessage(`"v"`)},
		events.StateDeleted{Key: "k"},
	}
	for _, set := range []map[events.Type]events.Event{sampleEvents(), minimalEvents()} {
		for _, e := range set {
			payloads = append(payloads, e.Payload)
		}
	}
	typed, checked := 0, 0
	for _, p := range payloads {
		ok, isTyped := events.TypedTextValid(p)
		if isTyped {
			typed++
			require.True(t, ok, "%T: %+v", p, p)
		}
		for where, m := range mutations(p) {
			ok, isTyped := events.TypedTextValid(m)
			if !isTyped || events.ValidatePayload(m) != nil {
				continue
			}
			checked++
			require.Equal(t, events.TextValid(m), ok, "%T: %s", p, where)
			require.False(t, ok, "%T: %s: the corruption must be caught", p, where)
		}
	}
	require.Greater(t, typed, 10)
	require.Greater(t, checked, 30, "the payloads must reach many strings")
}
