// Package worker runs agent workers: they consume the event stream through
// one durable JetStream consumer shared by every worker process (so N
// workers scale out), and whenever a thread is waiting for its agent — its
// last message is a user message, or tool results with no call left
// pending — they load the thread (consistent read), call the agent's model,
// run its tool calls, and append the assistant message with the tool results
// as one atomic turn, looping until the model answers without tool calls or
// the step cap is hit.
//
// # Exactly one answer per user message
//
// No locks: every append carries the version the worker read
// (client.ExpectVersion). Two workers that got the same work (a redelivery
// after a crash, or a slow ack) race; one append wins, the other gets a
// conflict, reloads, sees the thread is no longer waiting for the agent and
// stops. A worker killed mid-turn leaves either nothing or whole steps
// (atomic batches); the redelivered work resumes from the last committed
// step. A user message that arrives while a turn is being generated makes
// the in-flight append conflict; on reload the worker sees a newer user
// message and stops: the newer message's own delivery answers it with the
// whole history ("answer the latest"), and the superseded turn is counted
// and logged with reason "superseded".
//
// # Live tokens
//
// While the model streams, each piece is published as an events.Delta (JSON)
// on the thread's delta subject; the durable assistant message is the record.
package worker
