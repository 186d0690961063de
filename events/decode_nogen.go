//go:build convlog_nogen

package events

// Without its generated decoder (the build tag convlog_nogen, which the
// generator builds events with), every event goes to the reflection
// decoder.

func typeOf(t []byte) Type { return Type(t) }

func (r *reader) payload(Type) (Payload, bool) { return nil, false }
