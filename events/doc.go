// Package events defines convlog's wire contract: the event envelope, every
// event type, the msgpack codec, subject naming and per-event validation.
//
// # Model
//
// A thread is an append-only sequence of events on one JetStream subject,
//
//	<prefix>.<tenant>.<thread>           (default prefix "conv")
//
// so the thread's order is the stream sequence order and its version is the
// stream sequence of its last event (docs/design.md invariants 2 and 9). Live,
// non-persistent token deltas for streaming UIs go to the sibling subject
//
//	<prefix>.<tenant>.<thread>.delta
//
// which the stream (filter "<prefix>.*.*") does not capture, while a tenant
// permission such as "conv.acme.>" still covers both.
//
// # Envelope
//
// Every event is an [Event]: a writer-chosen id (UUIDv7, also the NATS
// de-duplication key Nats-Msg-Id), a [Type], tenant, thread, time (UTC,
// nanoseconds), producer, optional causation and correlation ids, the schema
// version and a typed [Payload]. The stream sequence is not part of the
// encoded event: JetStream assigns it and readers get it alongside
// (see [Stored]).
//
// On the wire an event is one msgpack map (see [Marshal]); the type is also
// carried in the NATS header [HeaderType] so consumers can filter without
// decoding. The JSON form ([MarshalJSON] on [Event]) has the same field
// names; schemas/ holds a JSON Schema for both and golden vectors.
// [Unmarshal] decodes with a hand-written decoder (no reflection) the forms
// Marshal writes, and leaves anything else to msgpack's reflection decoder,
// so every input decodes as that decoder defines; tests and a fuzz test
// compare the two.
//
// # Event types
//
// The registry (registry.go) is the one list of event types: each entry
// names the wire type and its payload type. "go generate ./events/"
// derives the rest from it and from the payload schemas: the decoder's type
// switches and payload readers (decode_gen.go), the type lists of
// schemas/envelope.json and of the HTTP API's Event schema, the type table
// of schemas/README.md and package audit's type names. A test fails while
// one of them is stale.
//
// This package depends on the standard library, msgpack and uuid only: it
// never imports NATS, so any service can use the contract.
package events
