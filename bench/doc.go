// Command bench measures every performance figure of convlog side by side
// with the alternatives, in one run on one machine, and writes
// BENCHMARKS.md and a chart of Get latency against thread length.
//
//	bench/run.sh            # full run, with PostgreSQL and Redis (started and stopped by the script)
//	bench/run.sh -quick     # development run, about 3 minutes (prints the report; -out and -png to write it)
//	go run -C bench . -quick # convlog and raw JetStream only
//
// # What runs where
//
// convlog runs as `agentd serve` runs it: an embedded nats-server
// (internal/embedded, JetStream file store in a temp dir, listening on
// loopback) in this process, the client and the projector on TCP
// connections of their own, and, for the agent turn section, agent workers
// (agentd/worker, offline model) and the HTTP API (agentd/httpapi). The
// raw JetStream baseline uses the same server and connection with a stream
// of the same configuration. PostgreSQL (-pg, a DSN) and Redis (-redis,
// host:port) are separate processes, which run.sh installs from Debian's
// packages when missing, starts on loopback ports of its own with data in
// a temp dir, and stops on exit; without -pg or -redis their columns read
// "–". The memory section starts a fresh server, projector and worker, each
// in a process of its own (this binary re-executed with
// CONVLOG_BENCH_CHILD set to the role), so that each one's heap and RSS are
// its own.
//
// # Sections
//
//  1. append: one ~600-byte event with a durable ack, sequential and with
//     32 writers over 1,000 threads: client.Append vs raw PublishMsg (same
//     bytes and headers) vs PostgreSQL INSERT vs Redis RPUSH;
//  2. get: whole threads of 100 to 100,000 messages: snapshot client.Get
//     with the chunk cache off (every byte from KV) and warm, and
//     consistent client.Get, vs one raw KV get vs PostgreSQL SELECT vs
//     Redis LRANGE, and the projection of one more event by thread length;
//  3. lag: projection lag (projector Config.OnApply) at steady rates, and
//     the projector's catch-up rate from a backlog;
//  4. replay: folding a long thread from the log, events per second;
//  5. turn: user message acknowledged -> final assistant message seen
//     over SSE and through client.Watch;
//  6. memory: heap and RSS of the server, the projector and the worker
//     after many threads.
//
// Systems are measured in rounds, interleaved (sequential appends
// alternating one by one and concurrent writers window by window, in a
// rotating order; Gets in an order shuffled every iteration, so that no
// system always follows the same one), so that the shared machine's
// background load falls on all of them alike; every ratio compares
// figures of the same run. A target's ratio is the median of the ratios
// taken within each round, reported with the lowest and highest, so that
// one round's burst of background load does not decide its verdict. Performance is reported,
// never asserted: bench_test.go runs every section at a tiny size against
// embedded NATS only and checks what was measured (that every Get returned
// the whole thread, that every figure has samples), not how fast.
//
// -json writes the raw results, -from renders the report and chart from
// such a file again, -notes appends a hand-written analysis (bench/NOTES.md
// by default) and -profile writes CPU profiles (this process, which holds
// the embedded server, and one per memory-section child) and the heap and
// goroutines of this process as the lag section starts. The lag section
// logs what the sections before it left: the live heap, the goroutines,
// and each stream's size and consumers.
package main
