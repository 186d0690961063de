// Package clustertest checks the production topology of docker-compose.yml
// without a Docker engine. It has no code besides its tests:
//
//   - TestComposeFile parses docker-compose.yml and checks its services
//     (three nats nodes running the nats-server version go.mod requires,
//     each with its own volume and mounted config file, agentd serve on all
//     three nodes with replicas 3 and API keys from the environment, a
//     workers-only agentd), the Dockerfile it builds, and each NATS config
//     file with `nats-server -t`.
//   - TestClusterSurvivesNodeLoss runs the same topology as processes:
//     nats-server built from the module graph (go build
//     github.com/nats-io/nats-server/v2), started three times with
//     deploy/nats/n{1,2,3}.conf, of which only the listen addresses, routes
//     and store_dir are rewritten (to 127.0.0.1 ports and temporary
//     directories, every substitution matching exactly once); and agentd
//     built from ./agentd, started with the compose services' own commands
//     and environment, of which only --nats-url, --http-addr and the API key
//     are replaced, restarted like compose's "restart: unless-stopped".
//
// Under load (100 threads, each appending a user message, waiting for the
// offline agent "demo" to answer and repeating; plus probe threads taking
// one state.set event every 20 ms, which measure write availability alone)
// the cluster test kills a follower node with SIGKILL and restarts it, kills
// the stream leader and restarts it, then restarts the three nodes one by
// one with SIGTERM. After each phase it waits until the stream's replicas
// are current and the workers' consumer has no pending work, and checks
// every thread: each acknowledged append is stored exactly once and no
// event id twice, each user message has exactly one final answer from the
// agent before the next user message, and the consistent read, the replay
// at the last sequence and the projector's snapshot all equal a fresh fold
// of the events. It logs the longest write pause, the longest pause in
// answered rounds, the slowest answer, and the retries, duplicates and
// conflicts seen by the test's client and both agentd processes.
//
// Processes run in their own process groups on 127.0.0.1 only and are
// killed at cleanup. Set CLUSTERTEST_KEEP_LOGS to a directory to keep the
// processes' logs.
package clustertest
