// Package agent groups what convlog's agent workers plug in: model
// providers (agent/model, with the conformance suite agent/model/modeltest)
// and tools (agent/tools). These packages depend on events and third-party
// libraries only, never on NATS or the client, so a worker, a test or
// another service can use them on their own. deps_test.go guards that.
package agent
