package audit

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/internal/directget"
)

// Scope picks what Verify checks: one thread (Tenant and Thread), one
// tenant (Tenant), or the whole stream (zero Scope).
type Scope struct {
	Tenant string `json:"tenant,omitempty"`
	Thread string `json:"thread,omitempty"`
}

func (s Scope) filter(prefix string) string {
	switch {
	case s.Thread != "":
		return prefix + "." + s.Tenant + "." + s.Thread
	case s.Tenant != "":
		return prefix + "." + s.Tenant + ".*"
	}
	return prefix + ".*.*"
}

func (s Scope) match(prefix, subject string) bool {
	switch {
	case s.Thread != "":
		return subject == s.filter(prefix)
	case s.Tenant != "":
		rest, ok := strings.CutPrefix(subject, prefix+"."+s.Tenant+".")
		return ok && rest != "" && !strings.Contains(rest, ".")
	}
	rest, ok := strings.CutPrefix(subject, prefix+".")
	tenant, thread, two := strings.Cut(rest, ".")
	return ok && two && tenant != "" && thread != "" && !strings.Contains(thread, ".")
}

// Anchor is a checkpoint a client or auditor trusted earlier: its
// message's stream sequence and its body hash (Report.LastCheckpoint).
// Verify fails when the stream no longer holds that exact checkpoint: the
// log was rewritten since it was trusted.
type Anchor struct {
	MsgSeq uint64 `json:"msg_seq"`
	Hash   string `json:"hash"`
}

// VerifyOptions configure [Verify]. Trusted is required.
type VerifyOptions struct {
	// Trusted are the public keys whose checkpoints are accepted.
	Trusted []ed25519.PublicKey
	// Stream and SubjectPrefix as in Config (defaults the same).
	Stream, SubjectPrefix string
	// Anchor, when set, is a checkpoint that must still be in the stream
	// (the verification then reads every checkpoint).
	Anchor *Anchor
	// HeadsBucket is the checkpointer's heads bucket (default
	// DefaultHeadsBucket): a verification of one thread starts from its
	// entry and reads only the checkpoints that name the thread. Without
	// it (or when its entry does not lead to them) every checkpoint is
	// read.
	HeadsBucket string
	// MaxProblems caps Report.Problems (default 100); the count of all
	// problems is Report.ProblemCount.
	MaxProblems int
	// Interval is the checkpoint cadence assumed when no signed checkpoint
	// of the stream records its own (Checkpoint.IntervalMS): when the
	// stream holds none (default DefaultInterval, agentd's).
	Interval time.Duration
	// MaxLag is the grace beyond the cadence (the checkpointer's delivery
	// and publish time, a restart's pause, a leader election): stored
	// events that no checkpoint covers are a problem (KindUncovered) once
	// they and the newest checkpoint are both older than the cadence plus
	// MaxLag. Default DefaultMaxLag.
	MaxLag time.Duration
}

// DefaultMaxLag is VerifyOptions.MaxLag's default: twice the
// checkpointer's longest pause between restarts after a failure.
const DefaultMaxLag = 10 * time.Second

// Problem kinds of a [Report].
const (
	KindAltered          = "altered"              // a stored message's leaf differs from its checkpointed leaf
	KindMissing          = "missing"              // a checkpointed message is gone and its thread was not erased
	KindInserted         = "inserted"             // a stored message is not in the checkpoint that covers its sequence
	KindSignature        = "checkpoint-signature" // a checkpoint does not verify with a trusted key
	KindCheckpointChain  = "checkpoint-chain"     // a checkpoint does not follow the previous one (Prev or From)
	KindCheckpointHeads  = "checkpoint-heads"     // a checkpoint's thread heads do not follow from its leaves or the previous head
	KindAnchorNotFound   = "anchor-not-found"     // the trusted checkpoint is not in the stream as it was
	KindCheckpointFormat = "checkpoint-format"    // a checkpoint body that does not decode
	// KindUncovered: stored events that no stored checkpoint covers,
	// though one should by now: events after the newest checkpoint (or
	// in a stream with none) older than the cadence plus MaxLag while no
	// checkpoint was stored for as long, or events before a checkpoint's
	// From that no earlier checkpoint covers. The checkpoints that
	// covered them were removed, or no checkpointer is running. One
	// problem for each run of such events, at its first.
	KindUncovered = "uncovered"
)

// Problem is one difference Verify found.
type Problem struct {
	// Seq is the stream sequence where it is: the message's, or the
	// checkpoint message's for the checkpoint kinds.
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject,omitempty"`
	Kind    string `json:"kind"`
	Detail  string `json:"detail"`
}

// Erasure is a thread whose checkpointed messages are gone because it was
// erased: a thread.erased marker is its first stored message.
type Erasure struct {
	Subject   string `json:"subject"`
	Events    int    `json:"events"`
	MarkerSeq uint64 `json:"marker_seq"`
}

// CheckpointRef names a checkpoint: Anchor (its message) plus what it
// covers.
type CheckpointRef struct {
	Anchor
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
}

// Report is what [Verify] found. OK is true when nothing differs;
// FirstBadSeq is the lowest sequence of any problem.
type Report struct {
	Scope          Scope          `json:"scope"`
	OK             bool           `json:"ok"`
	FirstBadSeq    uint64         `json:"first_bad_seq,omitempty"`
	Checkpoints    int            `json:"checkpoints"`
	LastCheckpoint *CheckpointRef `json:"last_checkpoint,omitempty"`
	// Verified counts the stored messages of the scope whose leaf matched
	// a signed checkpoint.
	Verified uint64 `json:"verified_events"`
	// Unsigned counts the stored messages of the scope after the last
	// checkpoint (not yet checkpointed: the cadence's window; those
	// overdue are a KindUncovered problem too).
	Unsigned uint64    `json:"unsigned_events"`
	Threads  int       `json:"threads"`
	Erased   []Erasure `json:"erased,omitempty"`
	// Redacted lists the verified event.redacted events of the scope:
	// the events they name read redacted (their keys were destroyed) while
	// their stored bytes, and so the chain, are unchanged. Not problems.
	Redacted     []Redaction `json:"redacted,omitempty"`
	Problems     []Problem   `json:"problems,omitempty"`
	ProblemCount int         `json:"problem_count"`
	Took         float64     `json:"took_seconds"`
	// Partitions are the reports of each partition of a deployment of
	// several (VerifyPartitions over more than one): the counts above
	// are their sums and OK their conjunction; FirstBadSeq and
	// LastCheckpoint are positions in one partition's stream, so they
	// are only in these.
	Partitions []*Report `json:"partitions,omitempty"`
}

// add records p, keeping at most about 2*max problems until finish.
func (r *Report) add(max int, p Problem) {
	r.ProblemCount++
	if r.FirstBadSeq == 0 || p.Seq < r.FirstBadSeq {
		r.FirstBadSeq = p.Seq
	}
	r.Problems = append(r.Problems, p)
	if len(r.Problems) >= 2*max {
		r.keep(max)
	}
}

// keep sorts the problems by sequence and keeps the first max.
func (r *Report) keep(max int) {
	slices.SortStableFunc(r.Problems, func(a, b Problem) int { return cmp.Compare(a.Seq, b.Seq) })
	if len(r.Problems) > max {
		r.Problems = r.Problems[:max]
	}
}

// finish completes a report: the first max problems by sequence, the
// verdict.
func (r *Report) finish(max int, threads int) {
	r.keep(max)
	r.Threads = threads
	r.OK = r.ProblemCount == 0
}

// Redaction is one event.redacted event: the redacted event (Seq, EventID,
// Fields), why, and where the redaction is recorded (MarkerSeq).
type Redaction struct {
	Subject   string   `json:"subject"`
	Seq       uint64   `json:"seq"`
	EventID   string   `json:"event_id"`
	UpToSeq   uint64   `json:"up_to_seq,omitempty"`
	Fields    []string `json:"fields,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	MarkerSeq uint64   `json:"marker_seq"`
}

// redactionOf decodes r when it is an event.redacted event (never sealed:
// schemas/payloads/event.redacted.json).
func redactionOf(r Record) (Redaction, bool) {
	if len(r.Header["Convlog-Type"]) == 0 || r.Header["Convlog-Type"][0] != RedactedType {
		return Redaction{}, false
	}
	var ev struct {
		Payload struct {
			Seq     uint64   `msgpack:"seq"`
			EventID string   `msgpack:"event_id"`
			UpToSeq uint64   `msgpack:"up_to_seq"`
			Fields  []string `msgpack:"fields"`
			Reason  string   `msgpack:"reason"`
		} `msgpack:"payload"`
	}
	if err := msgpack.Unmarshal(r.Data, &ev); err != nil {
		return Redaction{}, false
	}
	p := ev.Payload
	return Redaction{Subject: r.Subject, Seq: p.Seq, EventID: p.EventID, UpToSeq: p.UpToSeq, Fields: p.Fields, Reason: p.Reason, MarkerSeq: r.Seq}, true
}

// Verify re-reads the checkpoints and the scope's stored messages and
// reports every difference: each checkpoint's signature (a trusted key),
// the checkpoint chain (Prev, From), each thread's heads (Prev of the
// first checkpoint naming it is the zero hash, each later one the head
// before it; Head follows from Prev and the leaves), then each stored
// message's leaf against the checkpoint covering its sequence. A
// checkpointed message that is gone is an erasure when its thread's
// first stored message is a thread.erased marker (reported in Erased, not
// a problem), else a problem. Messages after the last checkpoint are
// counted as Unsigned. They are a KindUncovered problem when the oldest
// of them and the newest checkpoint were both stored longer ago than the
// cadence allows (the newest signed checkpoint's Checkpoint.IntervalMS,
// else opts.Interval, plus opts.MaxLag, on the server's clock): the
// checkpoints were removed or no checkpointer runs. A checkpointer that
// is behind but publishing is not a problem. Stored messages before a
// checkpoint's From that no earlier checkpoint covers are KindUncovered
// too (removed checkpoints), whatever their age.
//
// A clean report proves that every stored message of the scope is as it
// was when a trusted key signed it, at most the cadence after it was
// stored. It does not prove who wrote a message: one published on a
// thread subject with credentials that may publish there (the server's
// own) before its checkpoint is chained and signed like any other.
// docs/audit.md says what closes that.
//
// It reads in one pass, holding one checkpoint's leaves and one chain
// head per thread of the scope. The error is for what stopped the reading
// (NATS, ctx); differences are in the Report.
func Verify(ctx context.Context, js jetstream.JetStream, scope Scope, opts VerifyOptions) (*Report, error) {
	start := time.Now()
	if len(opts.Trusted) == 0 {
		return nil, errors.New("audit: Verify needs at least one trusted public key")
	}
	opts.SubjectPrefix = cmp.Or(opts.SubjectPrefix, DefaultSubjectPrefix)
	opts.Stream = cmp.Or(opts.Stream, DefaultStream)
	opts.HeadsBucket = cmp.Or(opts.HeadsBucket, DefaultHeadsBucket)
	opts.MaxProblems = cmp.Or(opts.MaxProblems, 100)
	opts.Interval = cmp.Or(opts.Interval, DefaultInterval)
	opts.MaxLag = cmp.Or(opts.MaxLag, DefaultMaxLag)
	var rep *Report
	var err error
	ok := false
	if scope.Thread != "" && opts.Anchor == nil {
		rep, ok, err = verifyByWalk(ctx, js, scope, opts)
		if err != nil {
			return nil, err
		}
	}
	if !ok {
		if rep, err = verifyAll(ctx, js, scope, opts); err != nil {
			return nil, err
		}
	}
	rep.Took = time.Since(start).Seconds()
	return rep, nil
}

// newVerifier returns the merge state of one verification that started
// at now (the server's clock).
func newVerifier(scope Scope, opts VerifyOptions, now time.Time) *verifier {
	return &verifier{rep: &Report{Scope: scope}, maxP: opts.MaxProblems, heads: map[string]Hash{}, missing: map[string][]uint64{}, threads: map[string]bool{},
		now: now, cadence: opts.Interval, maxLag: opts.MaxLag}
}

// serverNow is the server's time (a stream info's timestamp), so that the
// age of a stored message, whose time the server assigned too, does not
// depend on the verifier's clock; the local time when the server gives
// none.
func serverNow(ctx context.Context, js jetstream.JetStream, stream string) (time.Time, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return time.Time{}, fmt.Errorf("audit: stream %s: %w", stream, err)
	}
	if ts := st.CachedInfo().TimeStamp; !ts.IsZero() {
		return ts, nil
	}
	return time.Now(), nil
}

// readScope starts reading the stored messages of the scope, in stream
// order, into v.next; the returned function stops the reader and returns
// its error. Pages of records go through a channel (one send per page,
// not per message), read with a consumer as a long replay reads (client.Get's
// long reads; batched direct gets are slower: the server adds and
// nats.go parses six headers per message). The reader reads what
// was stored when it started.
func (v *verifier) readScope(ctx context.Context, js jetstream.JetStream, scope Scope, opts VerifyOptions) (wait func() error) {
	pages := make(chan []Record, 8)
	readErr := make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	send := func(page []Record) error {
		select {
		case pages <- page:
			return nil
		case <-rctx.Done():
			return rctx.Err()
		}
	}
	go func() {
		defer close(pages)
		var page []Record
		err := readOrdered(rctx, js, opts.Stream, scope.filter(opts.SubjectPrefix), 1, 0, func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
			page = append(page, Record{Subject: m.Subject(), Seq: md.Sequence.Stream, Time: md.Timestamp, Header: m.Headers(), Data: m.Data()})
			if len(page) < 256 {
				return nil
			}
			err := send(page)
			page = nil
			return err
		})
		if err == nil && len(page) > 0 {
			err = send(page)
		}
		readErr <- err
	}()
	var page []Record
	v.next = func() (Record, bool) {
		for len(page) == 0 {
			var ok bool
			if page, ok = <-pages; !ok {
				return Record{}, false
			}
		}
		r := page[0]
		page = page[1:]
		return r, true
	}
	return sync.OnceValue(func() error {
		// Stop the reader, and drain so that it can end.
		cancel()
		for range pages {
		}
		err := <-readErr
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			return nil // stopped here, before the end
		}
		return err
	})
}

// verifyAll reads every checkpoint and the scope's messages.
func verifyAll(ctx context.Context, js jetstream.JetStream, scope Scope, opts VerifyOptions) (*Report, error) {
	prefix, stream := opts.SubjectPrefix, opts.Stream
	// The server's time is taken before the last checkpoint is fixed: a
	// message stored longer than the cadence allows before now was
	// covered by a checkpoint stored before now, so before the last one.
	now, err := serverNow(ctx, js, stream)
	if err != nil {
		return nil, err
	}
	v := newVerifier(scope, opts, now)
	v.gaps = true
	// The last checkpoint is fixed first and the stored messages are read
	// after: every message a considered checkpoint covers was stored
	// before it, so the reader sees it.
	lastCp, err := directget.Last(ctx, js, stream, CheckpointSubject(prefix))
	if err != nil {
		return nil, fmt.Errorf("audit: last checkpoint: %w", err)
	}
	wait := v.readScope(ctx, js, scope, opts)
	defer func() { _ = wait() }()

	ch := &chainCheck{v: v, scope: scope, opts: opts}
	if lastCp != nil {
		if err := readCheckpoints(ctx, js, stream, prefix, 1, lastCp.Sequence, ch.checkpoint); err != nil {
			return nil, err
		}
	}
	return v.finishAll(ctx, js, opts, lastCp, ch, wait)
}

// chainCheck is verifyAll's walk over every checkpoint of the stream, in
// stream order: the previous checkpoint's body hash (have false before
// the first), the last sequence covered, and whether opts.Anchor was seen
// with its hash.
type chainCheck struct {
	v          *verifier
	scope      Scope
	opts       VerifyOptions
	lastBody   Hash
	have       bool
	covered    uint64
	anchorSeen bool
}

// checkpoint checks the checkpoint message at stream sequence msgSeq: its
// signature and format, its link to the previous checkpoint (Prev and
// From), then the stored messages it covers (verifier.checkpoint). It
// reports differences in the verifier's Report and returns nil (the
// signature of readCheckpoints' callback).
func (ch *chainCheck) checkpoint(msgSeq uint64, body []byte, h nats.Header) error {
	rep, maxP := ch.v.rep, ch.opts.MaxProblems
	rep.Checkpoints++
	bh := BodyHash(body)
	if a := ch.opts.Anchor; a != nil && a.MsgSeq == msgSeq {
		ch.anchorSeen = a.Hash == bh.String()
	}
	cp, err := openLazy(body, h.Get(HeaderSignature), ch.opts.Trusted)
	if err != nil {
		kind := KindCheckpointFormat
		if errors.Is(err, ErrBadSignature) {
			kind = KindSignature
		}
		rep.add(maxP, Problem{Seq: msgSeq, Kind: kind, Detail: err.Error()})
		ch.lastBody, ch.have = bh, true
		return nil
	}
	broken := false
	if want := ch.lastBody.String(); (ch.have && cp.Prev != want) || (!ch.have && cp.Prev != "") {
		broken = true
		rep.add(maxP, Problem{Seq: msgSeq, Kind: KindCheckpointChain, Detail: fmt.Sprintf("prev is %q, the previous checkpoint's body hash is %q: a checkpoint is missing or altered", cp.Prev, want)})
	}
	if cp.From != ch.covered+1 {
		broken = true
		rep.add(maxP, Problem{Seq: msgSeq, Kind: KindCheckpointChain, Detail: fmt.Sprintf("covers from sequence %d, the previous checkpoint ended at %d", cp.From, ch.covered)})
	}
	ch.lastBody, ch.have, ch.covered = bh, true, cp.Seq
	rep.LastCheckpoint = &CheckpointRef{Anchor: Anchor{MsgSeq: msgSeq, Hash: bh.String()}, Seq: cp.Seq, Time: cp.Time}
	ch.v.setCadence(cp.IntervalMS)
	ch.v.checkpoint(ch.opts.SubjectPrefix, ch.scope, msgSeq, cp, broken)
	return nil
}

// finishAll ends verifyAll after the checkpoints: the stored messages
// left are inserted ones (at or below the last covered sequence) or
// unsigned ones, lateness is judged against lastCp, a trusted anchor not
// seen is reported, and missing messages are resolved. It returns the
// finished report, or the error of the scope's reader (wait) or of
// resolveMissing.
func (v *verifier) finishAll(ctx context.Context, js jetstream.JetStream, opts VerifyOptions, lastCp *jetstream.RawStreamMsg, ch *chainCheck, wait func() error) (*Report, error) {
	// The rest of the stored messages are after the last checkpoint.
	for r, ok := v.take(); ok; r, ok = v.take() {
		if r.Seq <= ch.covered {
			v.inserted(r)
			continue
		}
		v.unsigned(r)
	}
	if err := wait(); err != nil {
		return nil, err
	}
	v.reportLate(lastCp)
	if opts.Anchor != nil && !ch.anchorSeen {
		v.rep.add(opts.MaxProblems, Problem{Seq: opts.Anchor.MsgSeq, Kind: KindAnchorNotFound,
			Detail: fmt.Sprintf("the trusted checkpoint (message %d, hash %s) is not in the stream as it was: the log was rewritten", opts.Anchor.MsgSeq, opts.Anchor.Hash)})
	}
	if err := v.resolveMissing(ctx, js, opts.Stream); err != nil {
		return nil, err
	}
	v.rep.finish(opts.MaxProblems, len(v.threads))
	return v.rep, nil
}

// verifyByWalk verifies one thread from the checkpoints that name it
// only (and the stream's newest checkpoint's signature): the heads bucket
// gives the newest one, and each names the one before
// (ThreadHeads.PrevCheckpoint), so the cost is the thread's, not the
// stream's. Checkpoints that do not name the thread are checked by a
// verification of the tenant or the stream. ok is false when the walk cannot decide (no heads bucket
// or entry, a link that does not lead to a valid checkpoint naming the
// thread, or a stored message that a later checkpoint of the stream
// covers but the walk did not reach: a stale or altered pointer); the
// caller then reads every checkpoint, which reports precisely.
func verifyByWalk(ctx context.Context, js jetstream.JetStream, scope Scope, opts VerifyOptions) (*Report, bool, error) {
	prefix, stream := opts.SubjectPrefix, opts.Stream
	subject := scope.filter(prefix)
	ref, ok := walkStart(ctx, js, opts.HeadsBucket, subject)
	if !ok {
		return nil, false, nil
	}
	now, err := serverNow(ctx, js, stream)
	if err != nil {
		return nil, false, err
	}
	lastCp, lastSeq, lastInterval, ok, err := newestCheckpoint(ctx, js, opts)
	if err != nil || !ok {
		return nil, false, err
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, false, fmt.Errorf("audit: stream %s: %w", stream, err)
	}
	// The thread's messages are read while the checkpoints are walked.
	v := newVerifier(scope, opts, now)
	v.setCadence(lastInterval)
	wait := v.readScope(ctx, js, scope, opts)
	defer func() { _ = wait() }()
	chain, ok := walkChain(ctx, st, subject, opts, ref.cp)
	if !ok {
		return nil, false, nil
	}
	for _, w := range chain {
		v.rep.Checkpoints++
		v.checkpoint(prefix, scope, w.msgSeq, w.cp, false)
	}
	ok, err = v.finishWalk(ctx, js, opts, chain[len(chain)-1], lastCp, lastSeq, wait)
	if err != nil || !ok {
		return nil, false, err
	}
	return v.rep, true, nil
}

// walkStart is where verifyByWalk starts: subject's entry in the heads
// bucket. ok is false when the bucket, the entry or its checkpoint is
// missing or the entry cannot be read (the walk cannot decide).
func walkStart(ctx context.Context, js jetstream.JetStream, bucket, subject string) (ref headRef, ok bool) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return ref, false
	}
	ref, err = readHeadRef(ctx, kv, subject)
	if err != nil || ref.cp == 0 {
		return ref, false
	}
	return ref, true
}

// newestCheckpoint reads the stream's newest checkpoint message, the last
// sequence it covers and its cadence (Checkpoint.IntervalMS). ok is false
// when there is none, or it does not verify with opts.Trusted or cannot
// be decoded (a forged or altered one is reported by the full read; older
// checkpoints that do not name the thread are the stream's and tenant's
// verifications'). It returns the error of reading it.
func newestCheckpoint(ctx context.Context, js jetstream.JetStream, opts VerifyOptions) (lastCp *jetstream.RawStreamMsg, lastSeq uint64, intervalMS int64, ok bool, err error) {
	lastCp, err = directget.Last(ctx, js, opts.Stream, CheckpointSubject(opts.SubjectPrefix))
	if err != nil {
		return nil, 0, 0, false, fmt.Errorf("audit: last checkpoint: %w", err)
	}
	if lastCp == nil || checkSignature(lastCp.Data, lastCp.Header.Get(HeaderSignature), opts.Trusted) != nil {
		return nil, 0, 0, false, nil
	}
	lastSeq, intervalMS, err = checkpointMeta(lastCp.Data)
	if err != nil {
		return nil, 0, 0, false, nil
	}
	return lastCp, lastSeq, intervalMS, true, nil
}

// walked is a checkpoint that verifyByWalk reached: its stream sequence,
// body, and decoded content with only the walked thread's heads.
type walked struct {
	msgSeq uint64
	body   []byte
	cp     lazyCheckpoint
}

// walkChain follows subject's checkpoints back from the one at stream
// sequence from through ThreadHeads.PrevCheckpoint, and returns them
// oldest first. ok is false when a link does not lead to a checkpoint
// that verifies with opts.Trusted, names subject and links further back.
func walkChain(ctx context.Context, st jetstream.Stream, subject string, opts VerifyOptions, from uint64) (chain []walked, ok bool) {
	for seq := from; seq != 0; {
		m, err := st.GetMsg(ctx, seq)
		if err != nil || m.Subject != CheckpointSubject(opts.SubjectPrefix) {
			return nil, false
		}
		cp, err := openLazy(m.Data, m.Header.Get(HeaderSignature), opts.Trusted)
		if err != nil {
			return nil, false
		}
		i, found := slices.BinarySearchFunc(cp.Threads, subject, func(t lazyThread, s string) int { return strings.Compare(t.Subject, s) })
		if !found || cp.Threads[i].PrevCheckpoint >= seq {
			return nil, false
		}
		cp.Threads = cp.Threads[i : i+1]
		chain = append(chain, walked{seq, m.Data, cp})
		seq = cp.Threads[0].PrevCheckpoint
	}
	slices.Reverse(chain)
	return chain, true
}

// finishWalk ends verifyByWalk after the walk: newest is the thread's
// newest checkpoint, lastCp and lastSeq the stream's newest checkpoint
// message and the last sequence it covers. The stored messages left are
// inserted ones (at or below newest's last sequence) or unsigned ones
// (after lastSeq); lateness is judged against lastCp and missing messages
// are resolved. ok is false when a message left is covered by a later
// checkpoint the walk did not reach (the full read decides). It returns
// the error of the scope's reader (wait) or of resolveMissing.
func (v *verifier) finishWalk(ctx context.Context, js jetstream.JetStream, opts VerifyOptions, newest walked, lastCp *jetstream.RawStreamMsg, lastSeq uint64, wait func() error) (ok bool, err error) {
	v.rep.LastCheckpoint = &CheckpointRef{Anchor: Anchor{MsgSeq: newest.msgSeq, Hash: BodyHash(newest.body).String()}, Seq: newest.cp.Seq, Time: newest.cp.Time}
	for r, ok := v.take(); ok; r, ok = v.take() {
		switch {
		case r.Seq <= newest.cp.Seq:
			v.inserted(r)
		case r.Seq <= lastSeq:
			// A later checkpoint covers it, but the walk did not reach one
			// naming the thread: let the full read decide.
			return false, nil
		default:
			v.unsigned(r)
		}
	}
	if err := wait(); err != nil {
		return false, err
	}
	v.reportLate(lastCp)
	if err := v.resolveMissing(ctx, js, opts.Stream); err != nil {
		return false, err
	}
	v.rep.finish(opts.MaxProblems, len(v.threads))
	return true, nil
}

type verifier struct {
	rep     *Report
	maxP    int
	heads   map[string]Hash
	missing map[string][]uint64
	threads map[string]bool
	next    func() (Record, bool)
	peeked  *Record
	// gaps: the checkpoints are read in full, so a stored message before
	// a checkpoint's From that reaches it is in no stored checkpoint.
	gaps bool
	// now (the server's clock when the verification started), the
	// cadence and the lag allowed decide when an unsigned message is late.
	now             time.Time
	cadence, maxLag time.Duration
	late            run
}

// run counts stored messages of one kind: how many, the first and the
// last sequence.
type run struct {
	n     uint64
	first Record
	last  uint64
}

func (u *run) add(r Record) {
	if u.n == 0 {
		u.first = r
	}
	u.n++
	u.last = r.Seq
}

// setCadence takes a signed checkpoint's recorded cadence (0: none
// recorded, the one assumed stays).
func (v *verifier) setCadence(ms int64) {
	if ms > 0 {
		v.cadence = time.Duration(ms) * time.Millisecond
	}
}

// unsigned counts r, a stored message after the last checkpoint, and
// notes it when it is older than the cadence allows.
func (v *verifier) unsigned(r Record) {
	v.threads[r.Subject] = true
	v.rep.Unsigned++
	if v.now.Sub(r.Time) > v.allowed() {
		v.late.add(r)
	}
}

// allowed is how long after a message was stored a checkpoint covers it.
func (v *verifier) allowed() time.Duration { return v.cadence + v.maxLag }

// reportLate adds the one problem for the unsigned messages that are
// late, unless the newest checkpoint (lastCp, nil when the stream holds
// none) was stored within the time allowed: a checkpointer that is
// publishing reaches them.
func (v *verifier) reportLate(lastCp *jetstream.RawStreamMsg) {
	if v.late.n == 0 || (lastCp != nil && v.now.Sub(lastCp.Time) <= v.allowed()) {
		return
	}
	r := v.late.first
	age := func(t time.Time) time.Duration { return v.now.Sub(t).Round(time.Millisecond) }
	newest := "the stream holds no checkpoint"
	cause := "the checkpoints were removed, or no checkpointer has run (agentd serve runs one unless --audit=false)"
	if lastCp != nil {
		newest = fmt.Sprintf("the newest checkpoint (message %d) was stored %s ago", lastCp.Sequence, age(lastCp.Time))
		cause = "the checkpoints after it were removed, or the checkpointer has stopped"
	}
	v.rep.add(v.maxP, Problem{Seq: r.Seq, Subject: r.Subject, Kind: KindUncovered,
		Detail: fmt.Sprintf("events %d-%d (%d in scope) are not covered by any checkpoint: %s and the oldest of them was stored %s ago, "+
			"longer than the checkpoint cadence allows (%s + %s grace): %s",
			r.Seq, v.late.last, v.late.n, newest, age(r.Time), v.cadence, v.maxLag, cause)})
}

// take returns the next stored record: the one peek kept, or a new one.
func (v *verifier) take() (Record, bool) {
	if v.peeked != nil {
		r := *v.peeked
		v.peeked = nil
		return r, true
	}
	return v.next()
}

func (v *verifier) peek() (Record, bool) {
	if v.peeked == nil {
		r, ok := v.next()
		if !ok {
			return r, false
		}
		v.peeked = &r
	}
	return *v.peeked, true
}

func (v *verifier) inserted(r Record) {
	v.threads[r.Subject] = true
	v.rep.add(v.maxP, Problem{Seq: r.Seq, Subject: r.Subject, Kind: KindInserted,
		Detail: "a stored message that no checkpoint covering its sequence lists: written behind convlog's back"})
}

type expected struct {
	subject string
	LeafEntry
}

// checkpoint checks cp's heads for the scope's threads and compares its
// leaves with the stored messages up to cp.Seq. broken says the
// checkpoint chain is broken before cp (already reported): a thread's
// head before cp is then taken from cp, not compared with the last one
// seen.
func (v *verifier) checkpoint(prefix string, scope Scope, msgSeq uint64, cp lazyCheckpoint, broken bool) {
	var exp []expected
	for _, th := range cp.Threads {
		if scope.match(prefix, th.Subject) {
			exp = v.threadHeads(th, msgSeq, broken, exp)
		}
	}
	slices.SortFunc(exp, func(a, b expected) int { return cmp.Compare(a.Seq, b.Seq) })
	v.compareLeaves(msgSeq, cp, exp)
}

// threadHeads checks th, a thread of the checkpoint in message msgSeq:
// its previous head against the last one seen (unless broken), its head
// against the previous head and its leaves; it keeps the head and
// returns exp with th's leaves appended. A thread whose hashes or
// leaves do not parse is reported and adds none.
func (v *verifier) threadHeads(th lazyThread, msgSeq uint64, broken bool, exp []expected) []expected {
	v.threads[th.Subject] = true
	prev, err1 := ParseHash(th.Prev)
	head, err2 := ParseHash(th.Head)
	leaves, err3 := parseLeaves(th.Leaves)
	if err := errors.Join(err1, err2, err3); err != nil {
		v.rep.add(v.maxP, Problem{Seq: msgSeq, Subject: th.Subject, Kind: KindCheckpointFormat, Detail: err.Error()})
		return exp
	}
	if prev != v.heads[th.Subject] && !broken {
		v.rep.add(v.maxP, Problem{Seq: msgSeq, Subject: th.Subject, Kind: KindCheckpointHeads,
			Detail: fmt.Sprintf("the thread's head before this checkpoint is %q, the previous checkpoint left it at %q", th.Prev, v.heads[th.Subject].String())})
	}
	h := prev
	for _, l := range leaves {
		h = Next(h, l.Leaf)
		exp = append(exp, expected{th.Subject, l})
	}
	if h != head {
		v.rep.add(v.maxP, Problem{Seq: msgSeq, Subject: th.Subject, Kind: KindCheckpointHeads,
			Detail: "the head does not follow from the previous head and the leaves"})
	}
	v.heads[th.Subject] = head
	return exp
}

// compareLeaves reads the stored messages up to cp.Seq and compares them
// with exp, the leaves of cp (message msgSeq) in sequence order: a leaf
// with no message is missing, a message with no leaf inserted (or, before
// cp.From with gaps reported, uncovered), a message unlike its leaf
// altered.
func (v *verifier) compareLeaves(msgSeq uint64, cp lazyCheckpoint, exp []expected) {
	var gap run
	i := 0
	for {
		r, ok := v.peek()
		if !ok || r.Seq > cp.Seq {
			break
		}
		v.peeked = nil
		if v.gaps && r.Seq < cp.From {
			v.threads[r.Subject] = true
			gap.add(r)
			continue
		}
		for i < len(exp) && exp[i].Seq < r.Seq {
			v.missing[exp[i].subject] = append(v.missing[exp[i].subject], exp[i].Seq)
			i++
		}
		if i < len(exp) && exp[i].Seq == r.Seq {
			v.compareLeaf(msgSeq, exp[i], r)
			i++
			continue
		}
		v.inserted(r)
	}
	for ; i < len(exp); i++ {
		v.missing[exp[i].subject] = append(v.missing[exp[i].subject], exp[i].Seq)
	}
	if gap.n > 0 {
		v.rep.add(v.maxP, Problem{Seq: gap.first.Seq, Subject: gap.first.Subject, Kind: KindUncovered,
			Detail: fmt.Sprintf("events %d-%d (%d in scope) are not covered by any checkpoint: the next one (message %d) covers from sequence %d, so the checkpoints that covered them were removed",
				gap.first.Seq, gap.last, gap.n, msgSeq, cp.From)})
	}
}

// compareLeaf checks the stored message r against e, its leaf in the
// checkpoint in message msgSeq: altered when the subject or the leaf
// differs, else verified (and a redaction noted).
func (v *verifier) compareLeaf(msgSeq uint64, e expected, r Record) {
	if e.subject != r.Subject || Leaf(r) != e.Leaf {
		v.rep.add(v.maxP, Problem{Seq: r.Seq, Subject: r.Subject, Kind: KindAltered,
			Detail: fmt.Sprintf("the stored message differs from the one checkpointed at stream sequence %d (subject %s)", msgSeq, e.subject)})
		return
	}
	v.rep.Verified++
	if red, ok := redactionOf(r); ok {
		v.rep.Redacted = append(v.rep.Redacted, red)
	}
}

// resolveMissing turns the missing messages of erased threads into
// Erasures and the others into problems.
func (v *verifier) resolveMissing(ctx context.Context, js jetstream.JetStream, stream string) error {
	for _, subj := range slices.Sorted(maps.Keys(v.missing)) {
		seqs := v.missing[subj]
		var marker uint64
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return fmt.Errorf("audit: stream %s: %w", stream, err)
		}
		first, err := st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return fmt.Errorf("audit: first message of %s: %w", subj, err)
		case first.Header.Get("Convlog-Type") == ErasedType && first.Sequence > slices.Max(seqs):
			marker = first.Sequence
		}
		if marker != 0 {
			v.rep.Erased = append(v.rep.Erased, Erasure{Subject: subj, Events: len(seqs), MarkerSeq: marker})
			continue
		}
		for _, s := range seqs {
			v.rep.add(v.maxP, Problem{Seq: s, Subject: subj, Kind: KindMissing,
				Detail: "a checkpointed message is gone and its thread was not erased: deleted or purged behind convlog's back"})
		}
	}
	return nil
}

// Partition names one partition of a deployment (docs/partitions-design.md):
// its stream, thread subject prefix and heads bucket. Each partition's
// stream has its own checkpoints, chain and checkpointer.
type Partition struct {
	Stream, SubjectPrefix, HeadsBucket string
}

// VerifyPartitions is [Verify] over parts, the partitions of a deployment
// (or, for a scope of one thread, only that thread's partition: a thread
// lives in one, events.Partition): with one partition it is Verify of it;
// with several it verifies each and returns their merged report
// (Report.Partitions). opts' Stream, SubjectPrefix and HeadsBucket are
// replaced by each partition's. An anchor is a position in one
// partition's stream: with several partitions it is refused. Errors are
// Verify's, naming the partition's stream.
func VerifyPartitions(ctx context.Context, js jetstream.JetStream, scope Scope, opts VerifyOptions, parts []Partition) (*Report, error) {
	if len(parts) == 0 {
		return nil, errors.New("audit: VerifyPartitions needs at least one partition")
	}
	one := func(p Partition) (*Report, error) {
		opts.Stream, opts.SubjectPrefix, opts.HeadsBucket = p.Stream, p.SubjectPrefix, p.HeadsBucket
		return Verify(ctx, js, scope, opts)
	}
	if len(parts) == 1 {
		return one(parts[0])
	}
	if opts.Anchor != nil {
		return nil, fmt.Errorf("audit: an anchor is a position in one partition's stream, and the deployment has %d partitions: verify one thread with it, or verify without one", len(parts))
	}
	start := time.Now()
	all := &Report{Scope: scope, OK: true}
	for _, p := range parts {
		r, err := one(p)
		if err != nil {
			return nil, fmt.Errorf("audit: partition %s: %w", p.Stream, err)
		}
		all.OK = all.OK && r.OK
		all.Checkpoints += r.Checkpoints
		all.Verified += r.Verified
		all.Unsigned += r.Unsigned
		all.Threads += r.Threads
		all.Erased = append(all.Erased, r.Erased...)
		all.Redacted = append(all.Redacted, r.Redacted...)
		all.Problems = append(all.Problems, r.Problems...)
		all.ProblemCount += r.ProblemCount
		all.Partitions = append(all.Partitions, r)
	}
	all.Took = time.Since(start).Seconds()
	return all, nil
}
