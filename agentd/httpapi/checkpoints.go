package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// checkpointsBody is GET /v1/threads/{id}/checkpoints (openapi.json
// CheckpointsResponse).
type checkpointsBody struct {
	Version     uint64           `json:"version"`
	Count       uint64           `json:"count"`
	Checkpoints []checkpointBody `json:"checkpoints"`
}

// checkpointBody is one checkpoint: its checkpoint.saved event and the
// checkpoint.writes events that name it, in stream order (each as the
// events page has it: the event with seq and stored_at).
type checkpointBody struct {
	Event  json.RawMessage   `json:"event"`
	Writes []json.RawMessage `json:"writes"`
}

// checkpointQuery is what GET /v1/threads/{id}/checkpoints selects.
type checkpointQuery struct {
	ns, id, before string
	anyNS          bool
	limit          int
}

func (q checkpointQuery) match(ns, id string) bool {
	return (q.anyNS || ns == q.ns) && (q.id == "" || id == q.id) && (q.before == "" || id < q.before)
}

// scanPage is how many sequences one step of the log scan reads, for
// checkpoints older than the fold's index.
const scanPage = 256

// getCheckpoints is GET /v1/threads/{id}/checkpoints?ns=&checkpoint_id=&before=&limit=:
// the thread's checkpoints (checkpoint.saved events with their
// checkpoint.writes), newest checkpoint id first, read at the sequences
// the fold's index names (fold.State.Checkpoints: the newest checkpoints,
// and the newest of each namespace with none among them). Checkpoints
// older than the index are found by reading the log backwards from its end, a page
// of scanPage sequences at a time, until limit are found.
func (s *Server) getCheckpoints(w http.ResponseWriter, r *http.Request) error {
	id, p := threadID(r)
	if p != nil {
		return p
	}
	q := r.URL.Query()
	if p := onlyParams(q, "ns", "checkpoint_id", "before", "limit"); p != nil {
		return p
	}
	cq := checkpointQuery{ns: q.Get("ns"), anyNS: !q.Has("ns"), id: q.Get("checkpoint_id"), before: q.Get("before")}
	if cq.limit, p = queryInt(q, "limit", 1, 100); p != nil {
		return p
	}
	if cq.limit == 0 {
		cq.limit = 10
	}
	tenant := tenantOf(r.Context())
	x, version, err := s.c.Checkpoints(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	out := checkpointsBody{Version: version, Checkpoints: []checkpointBody{}}
	if x == nil {
		return writeJSON(w, http.StatusOK, out)
	}
	out.Count = x.Count
	lr, err := s.newLogReader(tenant, id)
	if err != nil {
		return err
	}
	defer lr.close()
	rd := &seqReader{s: s, lr: lr, tenant: tenant, id: id}
	// The log is read only for what the index cannot answer: more
	// checkpoints than it names, or an id it does not hold.
	if out.Checkpoints, err = rd.indexed(r.Context(), x, cq); err == nil && len(out.Checkpoints) < cq.limit &&
		(cq.id == "" || len(out.Checkpoints) == 0) && x.Count > uint64(len(x.Entries)) {
		var older []checkpointBody
		older, err = rd.scan(r.Context(), x, cq, version, cq.limit-len(out.Checkpoints))
		out.Checkpoints = append(out.Checkpoints, older...)
	}
	switch {
	case errors.Is(err, errNoBudget):
		return busy(id)
	case err != nil && r.Context().Err() == nil:
		return s.readFailed(tenant, id, 0, err)
	case err != nil:
		return err
	}
	w.Header().Set("ETag", etag(version))
	return writeJSON(w, http.StatusOK, out)
}

// seqReader reads events of one thread at given sequences.
type seqReader struct {
	s          *Server
	lr         *logReader
	tenant, id string
}

// read returns the events of the thread with from <= seq <= to, decoded,
// with their JSON form, in stream order.
func (rd *seqReader) read(ctx context.Context, from, to uint64) ([]events.Stored, [][]byte, error) {
	var sts []events.Stored
	var raw [][]byte
	wctx, cancel := context.WithTimeout(ctx, rd.s.cfg.WriteTimeout)
	defer cancel()
	for from <= to {
		msgs, _, err := rd.lr.page(ctx, wctx, from, int(min(to-from+1, pageMsgs)))
		if err != nil {
			return nil, nil, err
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if m.Sequence > to {
				return sts, raw, nil
			}
			st, derr := rd.s.decodeRaw(rd.tenant, rd.id, m)
			sts = append(sts, st)
			raw = append(raw, storedJSON(st, derr))
			from = m.Sequence + 1
		}
	}
	return sts, raw, nil
}

// indexed returns the checkpoints of the index that q selects, newest id
// first (the newest entry first among equal ids), at most q.limit.
func (rd *seqReader) indexed(ctx context.Context, x *fold.CheckpointIndex, q checkpointQuery) ([]checkpointBody, error) {
	var picked []fold.CheckpointEntry
	for _, e := range slices.Backward(x.Entries) {
		if q.match(e.NS, e.ID) {
			picked = append(picked, e)
		}
	}
	// A namespace with no checkpoint in Entries: its newest is in Latest
	// (older ones only in the log, after it in the answer). Latest is not
	// searched for the checkpoints of every namespace, which the log
	// answers in order.
	if i := x.FindLatest(q.ns); !q.anyNS && len(picked) == 0 && i >= 0 && q.match(q.ns, x.Latest[i].ID) {
		picked = append(picked, x.Latest[i])
	}
	slices.SortStableFunc(picked, func(a, b fold.CheckpointEntry) int { return cmp.Compare(b.ID, a.ID) })
	picked = picked[:min(len(picked), q.limit)]
	var seqs []uint64
	for _, e := range picked {
		seqs = append(seqs, e.Seq)
		seqs = append(seqs, e.Writes...)
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	got := make(map[uint64][]byte, len(seqs))
	// Sequences close together are read as one range (a checkpoint and
	// its writes usually follow each other).
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1]-seqs[j] <= 16 {
			j++
		}
		sts, raw, err := rd.read(ctx, seqs[i], seqs[j])
		if err != nil {
			return nil, err
		}
		for k, st := range sts {
			got[st.Seq] = raw[k]
		}
		i = j + 1
	}
	out := make([]checkpointBody, 0, len(picked))
	for _, e := range picked {
		b, ok := got[e.Seq]
		if !ok {
			return nil, fmt.Errorf("checkpoint %q of thread %s: no event at seq %d", e.ID, rd.id, e.Seq)
		}
		cb := checkpointBody{Event: b, Writes: []json.RawMessage{}}
		for _, ws := range e.Writes {
			if b, ok := got[ws]; ok {
				cb.Writes = append(cb.Writes, b)
			}
		}
		out = append(out, cb)
	}
	return out, nil
}

// scan reads the log backwards from version for checkpoints older than
// the index that q selects, and returns at most n of them, newest stored
// first, each with the writes stored after it. Writes of indexed
// checkpoints are skipped; those of older ones are kept until their
// checkpoint is reached.
func (rd *seqReader) scan(ctx context.Context, x *fold.CheckpointIndex, q checkpointQuery, version uint64, n int) ([]checkpointBody, error) {
	type key struct{ ns, id string }
	indexed := make(map[key]bool, len(x.Entries)+len(x.Latest))
	for _, e := range x.Entries {
		indexed[key{e.NS, e.ID}] = true
	}
	if i := x.FindLatest(q.ns); !q.anyNS && i >= 0 {
		indexed[key{q.ns, x.Latest[i].ID}] = true
	}
	writes := map[key][]json.RawMessage{} // newest first
	seen := map[key]bool{}
	var out []checkpointBody
	for hi := version; hi > 0 && len(out) < n; {
		lo := max(hi, scanPage) - scanPage + 1
		sts, raw, err := rd.read(ctx, lo, hi)
		if err != nil {
			return nil, err
		}
		for i := len(sts) - 1; i >= 0 && len(out) < n; i-- {
			switch p := sts[i].Payload.(type) {
			case events.CheckpointWrites:
				if k := (key{p.NS, p.Checkpoint}); !indexed[k] && !seen[k] && q.match(p.NS, p.Checkpoint) {
					writes[k] = append(writes[k], raw[i])
				}
			case events.CheckpointSaved:
				k := key{p.NS, p.ID}
				if indexed[k] || seen[k] || !q.match(p.NS, p.ID) {
					continue
				}
				seen[k] = true
				ws := writes[k]
				delete(writes, k)
				slices.Reverse(ws)
				out = append(out, checkpointBody{Event: raw[i], Writes: append([]json.RawMessage{}, ws...)})
			case events.ThreadCreated, events.Forked:
				// The start of the current lifetime: nothing before it
				// belongs to the thread's checkpoints.
				return out, nil
			}
		}
		hi = lo - 1
	}
	return out, nil
}
