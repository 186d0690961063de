// Package convlog is an event-sourced conversation log for AI agents over
// NATS JetStream. See README.md (its Layout lists every package) and
// docs/design.md; the core packages are events (the wire contract), fold
// (the fold: events to a thread's state), snapstore (the snapshots in KV),
// projector (the runner that folds the stream into them), client (the Go
// library) and agentd (the daemon and CLI).
package convlog
