// Package convlog is an event-sourced conversation log for AI agents over
// NATS JetStream. See README.md; the packages are events (wire contract),
// projector (fold and KV snapshots), client (the Go library) and agentd
// (the daemon and CLI).
package convlog
