package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PartitionsKey is the key of the partitions record in ConfigBucket:
// {"partitions": K}.
const PartitionsKey = "partitions"

// partitionsRecord is the value of the partitions record:
// {"partitions": K}.
type partitionsRecord struct {
	Partitions int `json:"partitions"`
}

// Partition returns the resource names of partition p (0 <= p < K) of
// the deployment c (docs/partitions-design.md): partition 0 is c's own
// names, so that K=1 is the unpartitioned layout; partition p >= 1 has
// the stream "<Stream>_P<p>" with subjects "<SubjectPrefix>_p<p>.*.*"
// (stream subjects may not overlap, so the partition is in the first
// token) and the buckets "<SnapshotBucket>_p<p>", "<IndexBucket>_p<p>",
// "<KeyBucket>_p<p>". The blob, tenant, usage and config buckets and the
// tenant service are shared by every partition. The result's
// Partitions is c's; [Config.PartitionIndex] tells it is a partition.
func (c Config) Partition(p int) Config {
	c = c.WithDefaults()
	c.part = p + 1
	if p == 0 {
		return c
	}
	sfx := PartitionSuffix(p)
	c.Stream += "_P" + strconv.Itoa(p)
	c.SubjectPrefix += sfx
	c.SnapshotBucket += sfx
	c.IndexBucket += sfx
	c.KeyBucket += sfx
	return c
}

// PartitionSuffix is what partition p's bucket names add to partition
// 0's: "" for p = 0, "_p<p>" otherwise (Config.Partition).
func PartitionSuffix(p int) string {
	if p == 0 {
		return ""
	}
	return "_p" + strconv.Itoa(p)
}

// PartitionIndex returns p and true when c is the Config of partition p
// made by [Config.Partition], and 0 and false for a deployment's Config.
func (c Config) PartitionIndex() (int, bool) { return c.part - 1, c.part > 0 }

// ReadPartitions returns the deployment's K from its record in
// c.ConfigBucket: 1 when there is no record or no bucket (a deployment
// made before partitions existed, or not provisioned yet). It needs a
// direct get of "$KV.<ConfigBucket>.partitions"; errors are NATS errors or
// an unreadable record, named.
func ReadPartitions(ctx context.Context, js jetstream.JetStream, c Config) (int, error) {
	c = c.WithDefaults()
	kv, err := attempt(ctx, c, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.KeyValue(ctx, c.ConfigBucket)
	})
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("provision: KV bucket %s: %w", c.ConfigBucket, err)
	}
	k, _, err := readRecord(ctx, kv, c)
	return k, err
}

// readRecord returns the recorded K (1 and false when there is none).
//
// A direct get of a bucket just created on a cluster can find no server
// answering yet (nats.ErrNoResponders: the replicas' direct get
// subscriptions are not up); such a get is tried again, every
// noRespondersPause, for up to noRespondersWait or until ctx ends.
func readRecord(ctx context.Context, kv jetstream.KeyValue, c Config) (int, bool, error) {
	get := func(ctx context.Context) (jetstream.KeyValueEntry, error) { return kv.Get(ctx, PartitionsKey) }
	e, err := attempt(ctx, c, get)
	for deadline := time.Now().Add(noRespondersWait); errors.Is(err, nats.ErrNoResponders) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return 0, false, fmt.Errorf("provision: %s record in KV %s: %w (%w)", PartitionsKey, c.ConfigBucket, ctx.Err(), err)
		case <-time.After(noRespondersPause):
		}
		e, err = attempt(ctx, c, get)
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 1, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("provision: %s record in KV %s: %w", PartitionsKey, c.ConfigBucket, err)
	}
	k, err := ParsePartitions(e.Value())
	if err != nil {
		return 0, false, fmt.Errorf("provision: %s record in KV %s: %w", PartitionsKey, c.ConfigBucket, err)
	}
	return k, true, nil
}

// noRespondersWait and noRespondersPause bound readRecord's retries of
// a get nobody answered.
const (
	noRespondersWait  = 10 * time.Second
	noRespondersPause = 50 * time.Millisecond
)

// ParsePartitions parses the value of the partitions record,
// {"partitions": K}; the error quotes a value that is not that with K in
// 1..MaxPartitions.
func ParsePartitions(v []byte) (int, error) {
	var rec partitionsRecord
	if err := json.Unmarshal(v, &rec); err != nil || rec.Partitions < 1 || rec.Partitions > MaxPartitions {
		return 0, fmt.Errorf("not {\"partitions\": 1..%d}: %q", MaxPartitions, v)
	}
	return rec.Partitions, nil
}

// ensureRecord creates the config bucket and returns the deployment's K,
// recording c.Partitions (1 when 0) if nothing is recorded yet. It refuses
// a c.Partitions that differs from the record, and K > 1 for a deployment
// whose stream already holds events without a record (its threads were
// placed by K=1; moving them is a migration, docs/partitions-design.md).
func ensureRecord(ctx context.Context, js jetstream.JetStream, c Config) (int, error) {
	kv, err := ensureKV(ctx, js, c, c.ConfigBucket, "convlog deployment settings (partitions)")
	if err != nil {
		return 0, err
	}
	for range 3 {
		k, ok, err := readRecord(ctx, kv, c)
		if err != nil {
			return 0, err
		}
		if ok {
			if c.Partitions != 0 && c.Partitions != k {
				return 0, fmt.Errorf("provision: the deployment has %d partitions (KV %s, key %s) but %d were asked for: a different K moves threads between streams (migrate by export and import, docs/partitions-design.md)",
					k, c.ConfigBucket, PartitionsKey, c.Partitions)
			}
			return k, nil
		}
		want := max(c.Partitions, 1)
		if want > 1 {
			info, err := attempt(ctx, c, func(ctx context.Context) (*jetstream.StreamInfo, error) {
				st, err := js.Stream(ctx, c.Stream)
				if err != nil {
					return nil, err
				}
				return st.Info(ctx)
			})
			if err == nil && info.State.Msgs > 0 {
				return 0, fmt.Errorf("provision: stream %s already holds %d events placed without partitions: %d partitions cannot be set on it (migrate by export and import, docs/partitions-design.md)",
					c.Stream, info.State.Msgs, want)
			}
		}
		v, _ := json.Marshal(partitionsRecord{Partitions: want})
		if _, err := attempt(ctx, c, func(ctx context.Context) (uint64, error) {
			return kv.Create(ctx, PartitionsKey, v)
		}); err == nil {
			return want, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("provision: record %s in KV %s: %w", PartitionsKey, c.ConfigBucket, err)
		}
		// K was recorded meanwhile, by another process or by an attempt
		// whose reply was lost: read it
	}
	return 0, fmt.Errorf("provision: record %s in KV %s: could not be read or created", PartitionsKey, c.ConfigBucket)
}

// SpreadLeaders moves the leaders of the deployment c's partitions back to
// one server each when they are not (after a node failure its partitions'
// leaders moved to the other nodes, and NATS does not move them back):
// what Ensure does after provisioning, for a deployment of K > 1 (read
// from its record) with replicas. A leader already in place is left alone,
// so calling it often costs one stream info per partition; a move is a
// leader step-down, a pause of that partition's writes of well under a
// second. It returns the moves that failed (a preferred server that is
// down answers an error) and how many leaders it moved.
func SpreadLeaders(ctx context.Context, js jetstream.JetStream, c Config) (int, error) {
	c = c.WithDefaults()
	k, err := ReadPartitions(ctx, js, c)
	if err != nil || k < 2 {
		return 0, err
	}
	return spreadLeaders(ctx, js, c, k)
}

// spreadLeaders moves the leaders of the partitions' streams (and of
// each partition's snapshot bucket) so that partition p is led by the
// p-th of the replicas' servers in name order, modulo their number: at
// start every partition's leader is on a different server when K <= N.
// A leader already in place is left alone, so that a later Ensure does
// not pause writes. It uses a leader step-down naming the preferred
// server ($JS.API.STREAM.LEADER.STEPDOWN.<stream> with
// {"placement":{"preferred":...}}, nats-server 2.11+; a stream config may
// not name one). A failed move is returned; the partitions work wherever
// their leaders are.
func spreadLeaders(ctx context.Context, js jetstream.JetStream, c Config, k int) (int, error) {
	var errs []error
	moved := 0
	for p := range k {
		pc := c.Partition(p)
		for _, stream := range []string{pc.Stream, "KV_" + pc.SnapshotBucket} {
			m, err := moveLeader(ctx, js, c, stream, p)
			if err != nil {
				errs = append(errs, err)
			}
			if m {
				moved++
			}
		}
	}
	return moved, errors.Join(errs...)
}

// moveLeader moves stream's leader to the p-th of its servers (name
// order), waiting up to 10 s for the new leader; it reports whether it
// asked for a move. The step-down request is made once (a second one
// could move the leader again), each request bounded by c's attempt
// timeout.
func moveLeader(ctx context.Context, js jetstream.JetStream, c Config, stream string, p int) (bool, error) {
	st, err := attempt(ctx, c, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, stream) })
	if err != nil {
		return false, fmt.Errorf("provision: place leader of %s: %w", stream, err)
	}
	streamInfo := func(ctx context.Context) (*jetstream.StreamInfo, error) { return st.Info(ctx) }
	info, err := attempt(ctx, c, streamInfo)
	if err != nil || info.Cluster == nil || len(info.Cluster.Replicas) == 0 {
		return false, err
	}
	servers := []string{info.Cluster.Leader}
	for _, r := range info.Cluster.Replicas {
		servers = append(servers, r.Name)
	}
	slices.Sort(servers)
	want := servers[p%len(servers)]
	if info.Cluster.Leader == want {
		return false, nil
	}
	for _, r := range info.Cluster.Replicas {
		if r.Name == want && (r.Offline || !r.Current) {
			return false, nil // not a leader to be now; a later call moves it
		}
	}
	req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": want}})
	resp, err := once(ctx, c, func(ctx context.Context) (*nats.Msg, error) {
		return js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, req)
	})
	if err != nil {
		return true, fmt.Errorf("provision: place leader of %s on %s: %w", stream, want, err)
	}
	var r struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if json.Unmarshal(resp.Data, &r) == nil && r.Error != nil {
		return true, fmt.Errorf("provision: place leader of %s on %s: %s", stream, want, r.Error.Description)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if info, err := once(ctx, c, streamInfo); err == nil && info.Cluster != nil && info.Cluster.Leader == want {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true, fmt.Errorf("provision: place leader of %s on %s: not leader after 10 s", stream, want)
}

// ReplicasCurrent returns nil when info's stream has a leader and every
// other replica its config asks for is online, current and without lag:
// what a replicated stream needs before every request to it is answered
// (a stream just created, or one with a node just restarted, may leave a
// direct get without responders or a request unanswered). Otherwise the
// error says which condition fails. A stream without cluster information
// (a single server) counts as current.
func ReplicasCurrent(info *jetstream.StreamInfo) error {
	name := info.Config.Name
	if info.Cluster == nil {
		return nil
	}
	if info.Cluster.Leader == "" {
		return fmt.Errorf("stream %s has no leader", name)
	}
	if n := max(info.Config.Replicas, 1) - 1; len(info.Cluster.Replicas) != n {
		return fmt.Errorf("stream %s lists %d replicas besides its leader, want %d", name, len(info.Cluster.Replicas), n)
	}
	for _, r := range info.Cluster.Replicas {
		if !r.Current || r.Offline || r.Lag > 0 {
			return fmt.Errorf("stream %s replica %s: current %v, offline %v, lag %d", name, r.Name, r.Current, r.Offline, r.Lag)
		}
	}
	return nil
}
