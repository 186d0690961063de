package events

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Limits bound the size of one event's fields. Size of the encoded event as
// a whole is checked by writers against the server's max payload.
type Limits struct {
	// MaxToolCalls per assistant message. Default 128.
	MaxToolCalls int
	// MaxNameLen for tool names, agent, model, producer, state keys. Default 256.
	MaxNameLen int
	// MaxMessages in a Restore or Forked payload. Default 100,000.
	MaxMessages int
}

// DefaultLimits returns the limits [Event.Validate] applies.
func DefaultLimits() Limits {
	return Limits{MaxToolCalls: 128, MaxNameLen: 256, MaxMessages: 100_000}
}

// Validate checks e on its own, without the thread's state: envelope fields,
// ids, the payload's required fields, sizes, well-formed JSON, valid UTF-8
// in every string and times that have an RFC 3339 form (so that a valid
// event always has a JSON form that decodes to the same event). It returns
// the first problem as a *ValidationError (wrapping [ErrInvalid]) whose Field
// names the path, e.g. "payload.tool_calls[1].arguments", or an *IDError for
// a bad tenant or thread. Whether the event fits the thread (a pending call
// to answer, a live thread) is the fold's concern.
func (e Event) Validate() error { return e.ValidateLimits(DefaultLimits()) }

// ValidateLimits is [Event.Validate] with explicit limits.
func (e Event) ValidateLimits(l Limits) error {
	bad := func(field, format string, args ...any) error {
		return &ValidationError{EventID: e.ID, Type: e.Type, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if e.ID == "" {
		return bad("id", "is required (a UUIDv7 chosen by the writer)")
	}
	if !canonicalUUID(e.ID) {
		return bad("id", "%q is not a canonical lower-case UUID", e.ID)
	}
	if e.Type == "" {
		return bad("type", "is required")
	}
	if !knownType(e.Type) {
		return bad("type", "%q is not a known event type", e.Type)
	}
	if err := ValidateTenant(e.Tenant); err != nil {
		return err
	}
	if err := ValidateThreadID(e.Thread); err != nil {
		return err
	}
	if e.Time.IsZero() {
		return bad("time", "is required")
	}
	if err := validateTime(e.Time, "time", bad); err != nil {
		return err
	}
	if e.SchemaVersion < 1 || e.SchemaVersion > SchemaVersion {
		return bad("v", "schema version %d is not supported (1..%d)", e.SchemaVersion, SchemaVersion)
	}
	if len(e.Producer) > l.MaxNameLen {
		return bad("producer", "is %d bytes, the limit is %d", len(e.Producer), l.MaxNameLen)
	}
	for _, f := range []struct{ name, v string }{{"producer", e.Producer}, {"causation_id", e.CausationID}, {"correlation_id", e.CorrelationID}} {
		if !utf8.ValidString(f.v) {
			return bad(f.name, "is not valid UTF-8")
		}
	}
	if e.Payload == nil {
		return bad("payload", "is required")
	}
	if e.Payload.EventType() != e.Type {
		return bad("type", "is %q but the payload is a %q", e.Type, e.Payload.EventType())
	}
	pbad := func(field, format string, args ...any) error {
		return bad("payload."+field, format, args...)
	}
	if err := validatePayload(e.Payload, l, pbad); err != nil {
		return err
	}
	if ok, typed := typedTextValid(e.Payload); ok || !typed && textValid(reflect.ValueOf(e.Payload)) {
		return nil
	}
	// Find the field to name in the error.
	return validateText(reflect.ValueOf(e.Payload), "", pbad)
}

// typedTextValid is textValid for the payload types appended most often,
// without reflection, once validatePayload has accepted p: it checks the
// strings validatePayload does not (a message's text content and raw JSON
// values were checked there). typed is false for the other types, which
// textValid checks.
func typedTextValid(p Payload) (ok, typed bool) {
	switch v := p.(type) {
	case UserMessage:
		return partsTextValid(&v.Content) && utf8.ValidString(v.Name), true
	case AssistantMessage:
		ok = partsTextValid(&v.Content) && utf8.ValidString(v.Reasoning) && utf8.ValidString(v.Agent) &&
			utf8.ValidString(v.Model) && utf8.ValidString(v.Name) && utf8.ValidString(v.ReplyTo)
		for i := 0; ok && i < len(v.ToolCalls); i++ {
			ok = utf8.ValidString(v.ToolCalls[i].ID) && utf8.ValidString(v.ToolCalls[i].Name)
		}
		return ok, true
	case ToolResult:
		return partsTextValid(&v.Content) && utf8.ValidString(v.ToolCallID) && utf8.ValidString(v.Name), true
	case StateSet, StateDeleted:
		// The key's UTF-8 and the value's were checked by validateKey and validateJSON.
		return true, true
	}
	return false, false
}

// partsTextValid reports whether c's text (when c is not text content) and
// every string of its parts are valid UTF-8: validateContent checks text
// content and the text of text parts only.
func partsTextValid(c *Content) bool {
	if c.Kind != ContentText && !utf8.ValidString(c.Text) {
		return false
	}
	for i := range c.Parts {
		p := &c.Parts[i]
		for _, s := range [...]string{string(p.Type), p.Text, p.URL, p.Data, p.MediaType, p.Detail, p.FileID, p.Filename} {
			if !utf8.ValidString(s) {
				return false
			}
		}
	}
	return true
}

// canonicalUUID reports whether s is a UUID in canonical lower-case form
// (8-4-4-4-12 hex digits, RFC 9562 section 4), which is what uuid.Parse
// followed by String gives back unchanged.
func canonicalUUID(s string) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	// OR the class bits of every character: one bad character shows.
	var bad byte
	for _, r := range [...][2]int{{0, 8}, {9, 13}, {14, 18}, {19, 23}, {24, 36}} {
		for _, c := range []byte(s[r[0]:r[1]]) {
			bad |= notLowerHex[c]
		}
	}
	return bad == 0
}

// notLowerHex is 1 for every byte that is not 0-9 or a-f.
var notLowerHex = func() (t [256]byte) {
	for c := range t {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			t[c] = 1
		}
	}
	return t
}()

// exportedFields caches, per struct type, the indexes of its exported
// fields (reflect.Type.Field allocates; the fast path must not).
var exportedFields sync.Map // reflect.Type -> []int

func fieldsOf(t reflect.Type) []int {
	if f, ok := exportedFields.Load(t); ok {
		return f.([]int)
	}
	var idx []int
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			idx = append(idx, i)
		}
	}
	exportedFields.Store(t, idx)
	return idx
}

// textValid is the fast check of [validateText]: the same walk without
// paths or errors. It answers true when validateText would answer nil.
func textValid(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || textValid(v.Elem())
	case reflect.Slice:
		if v.Type() == rawJSONType {
			return utf8.Valid(v.Bytes())
		}
		for i := range v.Len() {
			if !textValid(v.Index(i)) {
				return false
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			k := it.Key()
			if k.Kind() == reflect.String && !utf8.ValidString(k.String()) || !textValid(it.Value()) {
				return false
			}
		}
	case reflect.Struct:
		return structTextValid(v)
	}
	return true
}

// structTextValid is textValid of a struct: a time's year, a Content's
// text and parts, or else every exported field.
func structTextValid(v reflect.Value) bool {
	switch v.Type() {
	case timeType:
		t := v.Interface().(time.Time)
		if t.IsZero() {
			return true
		}
		y := t.UTC().Year()
		return y >= 1 && y <= 9999
	case contentType:
		c := v.Interface().(Content)
		if !utf8.ValidString(c.Text) {
			return false
		}
		for i := range c.Parts {
			if !textValid(reflect.ValueOf(&c.Parts[i]).Elem()) {
				return false
			}
		}
		return true
	}
	for _, i := range fieldsOf(v.Type()) {
		if !textValid(v.Field(i)) {
			return false
		}
	}
	return true
}

// validateTime checks that t has an RFC 3339 form (years 1 to 9999), which
// the JSON form and the schemas need.
func validateTime(t time.Time, field string, bad badFunc) error {
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return bad(field, "year %d is outside 1..9999 (RFC 3339)", y)
	}
	return nil
}

var (
	timeType    = reflect.TypeFor[time.Time]()
	contentType = reflect.TypeFor[Content]()
	rawJSONType = reflect.TypeFor[json.RawMessage]()
)

// validateText walks a payload and checks what the field-specific rules do
// not: every string (map keys too) is valid UTF-8 and every time has an
// RFC 3339 form, so every valid event has a JSON form that decodes to the
// same event. Field paths use the JSON names; map keys are visited in
// order so the first problem reported is always the same one.
func validateText(v reflect.Value, path string, bad badFunc) error {
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return bad(path, "is not valid UTF-8")
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return validateText(v.Elem(), path, bad)
		}
	case reflect.Slice:
		if v.Type() == rawJSONType {
			if !utf8.Valid(v.Bytes()) {
				return bad(path, "is not valid UTF-8")
			}
			return nil
		}
		for i := range v.Len() {
			if err := validateText(v.Index(i), fmt.Sprintf("%s[%d]", path, i), bad); err != nil {
				return err
			}
		}
	case reflect.Map:
		return validateMapText(v, path, bad)
	case reflect.Struct:
		return validateStructText(v, path, bad)
	}
	return nil
}

// validateMapText is validateText of a map: its keys in order, each key
// and then its value.
func validateMapText(v reflect.Value, path string, bad badFunc) error {
	keys := v.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		p := fmt.Sprintf("%s[%q]", path, k.String())
		if !utf8.ValidString(k.String()) {
			return bad(p, "key is not valid UTF-8")
		}
		if err := validateText(v.MapIndex(k), p, bad); err != nil {
			return err
		}
	}
	return nil
}

// validateStructText is validateText of a struct: a time's RFC 3339
// form, a Content's text and parts, or else every exported field under
// its JSON name.
func validateStructText(v reflect.Value, path string, bad badFunc) error {
	switch v.Type() {
	case timeType:
		if t := v.Interface().(time.Time); !t.IsZero() {
			return validateTime(t, path, bad)
		}
		return nil
	case contentType:
		c := v.Interface().(Content)
		if !utf8.ValidString(c.Text) {
			return bad(path, "is not valid UTF-8")
		}
		return validateText(reflect.ValueOf(c.Parts), path, bad)
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		if path != "" {
			name = path + "." + name
		}
		if err := validateText(v.Field(i), name, bad); err != nil {
			return err
		}
	}
	return nil
}

type badFunc func(field, format string, args ...any) error

// validatePayload checks p by its type's rules; a registered payload type
// without rules of its own is valid as it is.
func validatePayload(p Payload, l Limits, bad badFunc) error {
	switch v := p.(type) {
	case ThreadCreated:
		return validateCreated(v, l, bad)
	case ThreadUpdated:
		return validateUpdated(v, l, bad)
	case UserMessage:
		return validateUser(v, l, bad)
	case AssistantMessage:
		return validateAssistant(v, l, bad)
	case ToolResult:
		return validateToolResult(v, l, bad)
	case Redacted:
		return validateRedacted(v, bad)
	case Restore:
		return validateMessages(v.Messages, l, "messages", bad)
	case Compaction:
		return validateCompaction(v, bad)
	case StateSet:
		return validateStateSet(v, l, bad)
	case StateDeleted:
		return validateKey(v.Key, l, bad)
	case CheckpointSaved:
		return validateCheckpointSaved(v, l, bad)
	case CheckpointWrites:
		return validateCheckpointWrites(v, l, bad)
	case Forked:
		return validateForked(v, l, bad)
	}
	if ti, ok := byType[p.EventType()]; ok && reflect.TypeOf(p) == ti.goType {
		return nil
	}
	return bad("", "unknown payload type %T", p)
}

func validateUpdated(v ThreadUpdated, l Limits, bad badFunc) error {
	if v.Replies != "" && v.Replies != RepliesAuto && v.Replies != RepliesOff {
		return bad("replies", "must be %q or %q, got %q", RepliesAuto, RepliesOff, v.Replies)
	}
	return validateMetadata(v.Metadata, l, bad, true)
}

func validateUser(v UserMessage, l Limits, bad badFunc) error {
	if err := validateContent(v.Content, "content", bad); err != nil {
		return err
	}
	if v.Content.IsNull() {
		return bad("content", "a user message needs content")
	}
	if err := validateName(v.Name, l, bad); err != nil {
		return err
	}
	return validateJSON(v.Metadata, "metadata", bad)
}

func validateToolResult(v ToolResult, l Limits, bad badFunc) error {
	if v.ToolCallID == "" {
		return bad("tool_call_id", "is required")
	}
	if len(v.ToolCallID) > l.MaxNameLen {
		return bad("tool_call_id", "is %d bytes, the limit is %d", len(v.ToolCallID), l.MaxNameLen)
	}
	if err := validateName(v.Name, l, bad); err != nil {
		return err
	}
	return validateContent(v.Content, "content", bad)
}

// validateRedacted: one event (seq and event_id) or a range (up_to_seq
// alone), and only redactable fields.
func validateRedacted(v Redacted, bad badFunc) error {
	switch {
	case v.UpToSeq != 0 && (v.Seq != 0 || v.EventID != ""):
		return bad("up_to_seq", "names a range: seq and event_id must be empty")
	case v.UpToSeq != 0:
	case v.Seq == 0:
		return bad("seq", "must be the stream sequence of an event of the thread")
	case v.EventID == "":
		return bad("event_id", "is required")
	}
	for i, f := range v.Fields {
		if !slices.Contains(RedactableFields, f) {
			return bad(fmt.Sprintf("fields[%d]", i), "%q is not a redactable field (%s)", f, strings.Join(RedactableFields, ", "))
		}
	}
	return nil
}

func validateCompaction(v Compaction, bad badFunc) error {
	if v.UpToSeq == 0 {
		return bad("up_to_seq", "must be a stream sequence > 0")
	}
	if v.Role != "" && v.Role != RoleUser && v.Role != RoleAssistant {
		return bad("role", "must be %q or %q, got %q", RoleUser, RoleAssistant, v.Role)
	}
	if v.Summary.IsNull() {
		return bad("summary", "is required")
	}
	return validateContent(v.Summary, "summary", bad)
}

func validateStateSet(v StateSet, l Limits, bad badFunc) error {
	if err := validateKey(v.Key, l, bad); err != nil {
		return err
	}
	if len(v.Value) == 0 {
		return bad("value", "is required (any JSON value; use null for null)")
	}
	return validateJSON(v.Value, "value", bad)
}

// validateForked: the source ids, the created payload (its fields under
// "created."), the copied state and messages; a fork by reference carries
// neither and names the source's sequence.
func validateForked(v Forked, l Limits, bad badFunc) error {
	if err := ValidateTenant(v.SourceTenant); err != nil {
		return bad("source_tenant", "%v", err)
	}
	if err := ValidateThreadID(v.SourceThread); err != nil {
		return bad("source_thread", "%v", err)
	}
	if err := validateCreated(v.Created, l, func(f, format string, args ...any) error {
		return bad("created."+f, format, args...)
	}); err != nil {
		return err
	}
	for k, val := range v.State {
		if err := validateJSON(val, fmt.Sprintf("state[%q]", k), bad); err != nil {
			return err
		}
	}
	if v.ByReference && (len(v.Messages) > 0 || len(v.State) > 0) {
		return bad("by_reference", "a fork by reference carries no messages or state (they are the source's as of source_seq)")
	}
	if v.ByReference && v.SourceSeq == 0 {
		return bad("source_seq", "a fork by reference needs the source's sequence")
	}
	return validateMessages(v.Messages, l, "messages", bad)
}

func validateCreated(v ThreadCreated, l Limits, bad badFunc) error {
	if len(v.Owner) > l.MaxNameLen {
		return bad("owner", "is %d bytes, the limit is %d", len(v.Owner), l.MaxNameLen)
	}
	if len(v.Agent) > l.MaxNameLen {
		return bad("agent", "is %d bytes, the limit is %d", len(v.Agent), l.MaxNameLen)
	}
	if v.Replies != "" && v.Replies != RepliesAuto && v.Replies != RepliesOff {
		return bad("replies", "must be %q or %q, got %q", RepliesAuto, RepliesOff, v.Replies)
	}
	if v.PendingPolicy != "" && v.PendingPolicy != PendingReject && v.PendingPolicy != PendingCancel {
		return bad("pending_policy", "must be %q or %q, got %q", PendingReject, PendingCancel, v.PendingPolicy)
	}
	if v.SystemPrompt != nil && !utf8.ValidString(*v.SystemPrompt) {
		return bad("system_prompt", "is not valid UTF-8")
	}
	if v.ExternalID != "" {
		if err := ValidateExternalID(v.ExternalID); err != nil {
			return bad("external_id", "%s", err.(*IDError).Reason)
		}
		if ValidateThreadID(v.ExternalID) == nil {
			return bad("external_id", "%q is a thread id itself: create the thread under it and leave external_id out", v.ExternalID)
		}
	}
	return validateMetadata(v.Metadata, l, bad, false)
}

func validateMetadata(md map[string]string, l Limits, bad badFunc, allowEmpty bool) error {
	for k, v := range md {
		if k == "" || len(k) > l.MaxNameLen {
			return bad("metadata", "key %q must be 1..%d bytes", k, l.MaxNameLen)
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return bad(fmt.Sprintf("metadata[%q]", k), "is not valid UTF-8")
		}
		if v == "" && !allowEmpty {
			return bad(fmt.Sprintf("metadata[%q]", k), "must not be empty")
		}
	}
	return nil
}

func validateAssistant(v AssistantMessage, l Limits, bad badFunc) error {
	if err := validateContent(v.Content, "content", bad); err != nil {
		return err
	}
	if v.Content.IsNull() && len(v.ToolCalls) == 0 && v.Reasoning == "" {
		return bad("content", "an assistant message needs content, reasoning or tool calls")
	}
	if err := validateCalls(v.ToolCalls, l, "tool_calls", bad); err != nil {
		return err
	}
	if len(v.Agent) > l.MaxNameLen {
		return bad("agent", "is %d bytes, the limit is %d", len(v.Agent), l.MaxNameLen)
	}
	if len(v.Model) > l.MaxNameLen {
		return bad("model", "is %d bytes, the limit is %d", len(v.Model), l.MaxNameLen)
	}
	if err := validateName(v.Name, l, bad); err != nil {
		return err
	}
	return validateJSON(v.Metadata, "metadata", bad)
}

func validateCalls(calls []ToolCall, l Limits, field string, bad badFunc) error {
	if len(calls) > l.MaxToolCalls {
		return bad(field, "has %d tool calls, the limit is %d", len(calls), l.MaxToolCalls)
	}
	for i := range calls {
		c := &calls[i]
		// The call's path is formatted only for an error.
		callBad := func(sub, format string, args ...any) error {
			return bad(fmt.Sprintf("%s[%d].%s", field, i, sub), format, args...)
		}
		if c.ID == "" {
			return callBad("id", "is required")
		}
		if len(c.ID) > l.MaxNameLen {
			return callBad("id", "is %d bytes, the limit is %d", len(c.ID), l.MaxNameLen)
		}
		// At most MaxToolCalls calls: comparing with the earlier ones
		// costs less than a set.
		if slices.ContainsFunc(calls[:i], func(o ToolCall) bool { return o.ID == c.ID }) {
			return callBad("id", "%q is used twice in one message", c.ID)
		}
		if c.Name == "" {
			return callBad("name", "is required")
		}
		if len(c.Name) > l.MaxNameLen {
			return callBad("name", "is %d bytes, the limit is %d", len(c.Name), l.MaxNameLen)
		}
		if !json.Valid([]byte(c.Arguments)) {
			return callBad("arguments", "is not well-formed JSON: %.60q", c.Arguments)
		}
		if !utf8.ValidString(c.Arguments) {
			return callBad("arguments", "is not valid UTF-8")
		}
	}
	return nil
}

func validateMessages(ms []Message, l Limits, field string, bad badFunc) error {
	if len(ms) > l.MaxMessages {
		return bad(field, "has %d messages, the limit is %d", len(ms), l.MaxMessages)
	}
	for i, m := range ms {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch m.Role {
		case RoleSystem, RoleUser:
			if err := validateContent(m.Content, f+".content", bad); err != nil {
				return err
			}
		case RoleAssistant:
			if err := validateContent(m.Content, f+".content", bad); err != nil {
				return err
			}
			if err := validateCalls(m.ToolCalls, l, f+".tool_calls", bad); err != nil {
				return err
			}
		case RoleTool:
			if m.ToolCallID == "" {
				return bad(f+".tool_call_id", "is required on a tool message")
			}
			if err := validateContent(m.Content, f+".content", bad); err != nil {
				return err
			}
		default:
			return bad(f+".role", "must be system, user, assistant or tool, got %q", m.Role)
		}
		if err := validateJSON(m.Metadata, f+".metadata", bad); err != nil {
			return err
		}
	}
	return nil
}

func validateContent(c Content, field string, bad badFunc) error {
	switch c.Kind {
	case ContentNull:
		return nil
	case ContentText:
		if !utf8.ValidString(c.Text) {
			return bad(field, "is not valid UTF-8")
		}
		return nil
	case ContentParts:
		for i, p := range c.Parts {
			f := fmt.Sprintf("%s[%d]", field, i)
			switch p.Type {
			case PartText:
				if !utf8.ValidString(p.Text) {
					return bad(f+".text", "is not valid UTF-8")
				}
			case PartImage:
				if (p.URL == "") == (p.Data == "") {
					return bad(f, "an image part needs exactly one of url and data")
				}
				if p.Data != "" && p.MediaType == "" {
					return bad(f+".media_type", "is required with data")
				}
			case PartFile:
				if p.FileID == "" && p.Data == "" && p.URL == "" {
					return bad(f, "a file part needs file_id, url or data")
				}
			default:
				return bad(f+".type", "must be text, image or file, got %q", p.Type)
			}
		}
		return nil
	}
	return bad(field, "has unknown content kind %d", c.Kind)
}

// validateName checks the optional participant or tool name of a message.
func validateName(name string, l Limits, bad badFunc) error {
	if len(name) > l.MaxNameLen {
		return bad("name", "is %d bytes, the limit is %d", len(name), l.MaxNameLen)
	}
	return nil
}

func validateKey(k string, l Limits, bad badFunc) error {
	if k == "" {
		return bad("key", "is required")
	}
	if len(k) > l.MaxNameLen {
		return bad("key", "is %d bytes, the limit is %d", len(k), l.MaxNameLen)
	}
	if !utf8.ValidString(k) {
		return bad("key", "is not valid UTF-8")
	}
	return nil
}

func validateJSON(raw json.RawMessage, field string, bad badFunc) error {
	if len(raw) == 0 {
		return nil
	}
	if !json.Valid(raw) {
		return bad(field, "is not well-formed JSON: %.60q", string(raw))
	}
	if !utf8.Valid(raw) {
		return bad(field, "is not valid UTF-8")
	}
	return nil
}
