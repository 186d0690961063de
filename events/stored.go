package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// MarshalJSON encodes a stored event as the event's JSON form (see
// [Event.MarshalJSON]) with "seq" (the stream sequence) and "stored_at"
// (the server's store time, RFC 3339 UTC) added first. This is the shape of
// SSE data, `GET /v1/threads/{id}?events=true` and `export --format events`.
func (s Stored) MarshalJSON() ([]byte, error) {
	ev, err := s.Event.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`{"seq":`)
	b.WriteString(strconv.FormatUint(s.Seq, 10))
	b.WriteString(`,"stored_at":`)
	b.WriteString(strconv.Quote(s.StoredAt.UTC().Format(time.RFC3339Nano)))
	if len(ev) > 2 {
		b.WriteByte(',')
		b.Write(ev[1:])
	} else {
		b.WriteByte('}')
	}
	return b.Bytes(), nil
}

// UnmarshalJSON decodes the form written by [Stored.MarshalJSON]. Errors
// are those of [Event.UnmarshalJSON], or a decode error naming seq or
// stored_at.
func (s *Stored) UnmarshalJSON(b []byte) error {
	var meta struct {
		Seq      uint64    `json:"seq"`
		StoredAt time.Time `json:"stored_at"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("%w: seq/stored_at: %v", ErrDecode, err)
	}
	var ev Event
	if err := ev.UnmarshalJSON(b); err != nil {
		return err
	}
	*s = Stored{Event: ev, Seq: meta.Seq, StoredAt: meta.StoredAt.UTC()}
	return nil
}
