package events

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// ContentKind says which of its three shapes a [Content] has.
type ContentKind uint8

// The shapes of [Content], mirroring the OpenAI chat format's content field.
const (
	// ContentNull is absent content (JSON null), as on an assistant turn that
	// only calls tools. It is the zero value.
	ContentNull ContentKind = iota
	// ContentText is a plain string (possibly empty).
	ContentText
	// ContentParts is a list of typed parts (multimodal messages).
	ContentParts
)

// PartType names the kind of one [Part].
type PartType string

// Part types. Source: the OpenAI chat content parts and DeepAgents'
// AgentContentBlock (text, image by URL or base64, file reference).
const (
	PartText  PartType = "text"
	PartImage PartType = "image"
	PartFile  PartType = "file"
)

// Part is one element of multimodal [Content].
//
//   - text:  Text is set.
//   - image: URL (http(s) or data: URL) or Data (base64) with MediaType;
//     Detail optionally "low", "high" or "auto".
//   - file:  FileID (a provider or object-store reference) or Data (base64),
//     with optional Filename and MediaType.
type Part struct {
	Type      PartType `msgpack:"type" json:"type"`
	Text      string   `msgpack:"text,omitempty" json:"text,omitempty"`
	URL       string   `msgpack:"url,omitempty" json:"url,omitempty"`
	Data      string   `msgpack:"data,omitempty" json:"data,omitempty"`
	MediaType string   `msgpack:"media_type,omitempty" json:"media_type,omitempty"`
	Detail    string   `msgpack:"detail,omitempty" json:"detail,omitempty"`
	FileID    string   `msgpack:"file_id,omitempty" json:"file_id,omitempty"`
	Filename  string   `msgpack:"filename,omitempty" json:"filename,omitempty"`
}

// Content is a message body: null, a string, or a list of [Part]s. It
// encodes as exactly that in both msgpack (nil / str / array) and JSON
// (null / string / array), so OpenAI-format content round-trips byte for
// byte, including null versus "". The zero value is null content.
//
// Content is a value type; do not modify Parts of a Content you did not build.
type Content struct {
	Kind  ContentKind
	Text  string
	Parts []Part
}

// Text returns string content.
func Text(s string) Content { return Content{Kind: ContentText, Text: s} }

// Parts returns multimodal content made of ps. With no parts, Parts is an
// empty non-nil slice, which is what both decoders produce for "[]", so the
// content round-trips exactly.
func Parts(ps ...Part) Content {
	if ps == nil {
		ps = []Part{}
	}
	return Content{Kind: ContentParts, Parts: ps}
}

// IsNull reports whether c is null content.
func (c Content) IsNull() bool { return c.Kind == ContentNull }

// String returns the text of c: the string itself, or the text parts joined
// by newlines; "" for null content.
func (c Content) String() string {
	switch c.Kind {
	case ContentText:
		return c.Text
	case ContentParts:
		var b bytes.Buffer
		for _, p := range c.Parts {
			if p.Type == PartText {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// Size is the approximate number of bytes c occupies (used by size limits).
func (c Content) Size() int {
	n := len(c.Text)
	for _, p := range c.Parts {
		n += len(p.Text) + len(p.URL) + len(p.Data) + len(p.FileID) + len(p.Filename) + len(p.MediaType) + 16
	}
	return n
}

// Equal reports whether c and o are the same content (same shape, bytes).
func (c Content) Equal(o Content) bool {
	if c.Kind != o.Kind || c.Text != o.Text || len(c.Parts) != len(o.Parts) {
		return false
	}
	for i := range c.Parts {
		if c.Parts[i] != o.Parts[i] {
			return false
		}
	}
	return true
}

// MarshalJSON encodes null, a JSON string or an array of parts.
func (c Content) MarshalJSON() ([]byte, error) {
	switch c.Kind {
	case ContentNull:
		return []byte("null"), nil
	case ContentText:
		return marshalJSONNoEscape(c.Text)
	case ContentParts:
		if c.Parts == nil {
			return []byte("[]"), nil
		}
		return marshalJSONNoEscape(c.Parts)
	}
	return nil, fmt.Errorf("events: content has unknown kind %d", c.Kind)
}

// UnmarshalJSON accepts null, a string, or an array of parts.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		*c = Content{}
		return nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = Text(s)
		return nil
	case b[0] == '[':
		var ps []Part
		if err := json.Unmarshal(b, &ps); err != nil {
			return err
		}
		if ps == nil {
			ps = []Part{}
		}
		*c = Content{Kind: ContentParts, Parts: ps}
		return nil
	}
	return fmt.Errorf("events: content must be null, a string or an array of parts, got %.20s", b)
}

var (
	_ msgpack.CustomEncoder = Content{}
	_ msgpack.CustomDecoder = (*Content)(nil)
)

// EncodeMsgpack encodes nil, a str or an array of parts.
func (c Content) EncodeMsgpack(enc *msgpack.Encoder) error {
	switch c.Kind {
	case ContentNull:
		return enc.EncodeNil()
	case ContentText:
		return enc.EncodeString(c.Text)
	case ContentParts:
		if err := enc.EncodeArrayLen(len(c.Parts)); err != nil {
			return err
		}
		for i := range c.Parts {
			if err := enc.Encode(&c.Parts[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("events: content has unknown kind %d", c.Kind)
}

// DecodeMsgpack decodes nil, a str or an array of parts.
func (c *Content) DecodeMsgpack(dec *msgpack.Decoder) error {
	code, err := dec.PeekCode()
	if err != nil {
		return err
	}
	switch {
	case code == 0xc0: // nil
		*c = Content{}
		return dec.Skip()
	case isMsgpackStr(code):
		s, err := dec.DecodeString()
		if err != nil {
			return err
		}
		*c = Text(s)
		return nil
	case isMsgpackArray(code):
		n, err := dec.DecodeArrayLen()
		if err != nil {
			return err
		}
		if n < 0 || n > maxParts {
			return fmt.Errorf("events: content has %d parts (max %d)", n, maxParts)
		}
		ps := make([]Part, n)
		for i := range ps {
			if err := dec.Decode(&ps[i]); err != nil {
				return err
			}
		}
		*c = Content{Kind: ContentParts, Parts: ps}
		return nil
	}
	return fmt.Errorf("events: content must be nil, str or array (msgpack code 0x%02x)", code)
}

const maxParts = 1024

func isMsgpackStr(c byte) bool {
	return (c >= 0xa0 && c <= 0xbf) || c == 0xd9 || c == 0xda || c == 0xdb
}

func isMsgpackArray(c byte) bool {
	return (c >= 0x90 && c <= 0x9f) || c == 0xdc || c == 0xdd
}

// marshalJSONNoEscape encodes v without HTML escaping, so "<", ">" and "&"
// stay as they are (the form chat APIs and the transcripts use).
func marshalJSONNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
