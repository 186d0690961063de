package events_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/eventfixtures"
)

// filled returns a value of type t with every exported field set, to the
// depth of its structs, slices (two elements), maps (one entry) and
// pointers: strings and integers distinct by n, raw JSON an object,
// Content parts of such parts. A field added to a payload type later is
// set here without this test changing.
func filled(t reflect.Type, n *int) reflect.Value {
	*n++
	v := reflect.New(t).Elem()
	switch {
	case t == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2025, 1, 2, 3, 4, 5, *n, time.UTC)))
	case t == reflect.TypeFor[json.RawMessage]():
		v.SetBytes(fmt.Appendf(nil, `{"k":%d}`, *n))
	case t == reflect.TypeFor[events.Content]():
		var p1, p2 events.Part
		reflect.ValueOf(&p1).Elem().Set(filled(reflect.TypeFor[events.Part](), n))
		reflect.ValueOf(&p2).Elem().Set(filled(reflect.TypeFor[events.Part](), n))
		v.Set(reflect.ValueOf(events.Parts(p1, p2)))
	case t.Kind() == reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case t.Kind() == reflect.Bool:
		v.SetBool(true)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		v.SetInt(int64(*n) * 1000)
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		v.SetUint(uint64(*n) * 1000)
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case t.Kind() == reflect.Pointer:
		p := reflect.New(t.Elem())
		p.Elem().Set(filled(t.Elem(), n))
		v.Set(p)
	case t.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(t, 2, 2))
		for i := range 2 {
			v.Index(i).Set(filled(t.Elem(), n))
		}
	case t.Kind() == reflect.Map:
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(filled(t.Key(), n), filled(t.Elem(), n))
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(filled(t.Field(i).Type, n))
			}
		}
	}
	return v
}

// The payload types Marshal writes without reflection, with every field
// set (filled), are encoded byte for byte as the reflection encoder
// encodes them: a field added to one of them must be written by its
// encoder too, or this fails.
func TestPayloadEncodersWriteEveryField(t *testing.T) {
	for _, p := range []events.Payload{events.UserMessage{}, events.AssistantMessage{}, events.ToolResult{},
		events.StateSet{}, events.StateDeleted{}} {
		n := 0
		full := filled(reflect.TypeOf(p), &n).Interface().(events.Payload)
		requireReflectionBytes(t, eventfixtures.Event(1, "p", full), "%T with every field set: %+v", full, full)
	}
}
