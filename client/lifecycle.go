package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/snapstore"
)

// ForkOptions describe a fork. The new thread's attributes default to the
// source's; ThreadID defaults to a new id (Config.NewThreadID).
type ForkOptions struct {
	// AtSeq is the source sequence to fork at (0 = the source's current
	// version).
	AtSeq uint64
	// Tenant and ThreadID of the new thread (Tenant defaults to the source's).
	Tenant   string
	ThreadID string
	// Overrides for the new thread (nil = copy from the source).
	Created *events.ThreadCreated
	// ByReference forks by reference (events.Forked.ByReference): the
	// event names the source and sequence only and readers take the
	// history and state from the source. A fork whose copy would not fit
	// in one event (the server's max payload) is made by reference
	// whatever this says.
	ByReference bool
}

// Fork creates a new thread whose first event is thread.forked, carrying the
// source's history, key-value state and attributes as of opts.AtSeq
// (replayed from the log). The source is not changed. It returns the new
// thread's tenant, id and version.
//
// The history is copied into the fork event (so the fork reads on its own
// and survives the source's erasure) unless opts.ByReference, or the copy
// would not fit in one event: then the event names the source and sequence
// only and every read resolves the history from the source (ApplyFork),
// so a thread of any length forks; a fork by reference loses what it
// inherited when the source is erased. A fork with a ThreadID that already holds
// the fork of the same source at the same sequence (a retry) returns that
// fork; any other thread under ThreadID is [ErrThreadExists] (wrapped with
// the *ConflictError). Errors as for Get and Append.
func (c *Client) Fork(ctx context.Context, tenant, thread string, opts ForkOptions) (string, string, uint64, error) {
	if p := c.route(tenant, thread); p != c {
		return p.Fork(ctx, tenant, thread, opts)
	}
	getOpts := []GetOption{Consistent()}
	if opts.AtSeq != 0 {
		getOpts = []GetOption{AtSeq(opts.AtSeq)}
	}
	src, err := c.Get(ctx, tenant, thread, getOpts...)
	if err != nil {
		return "", "", 0, err
	}
	created := events.ThreadCreated{Owner: src.Owner, Agent: src.Agent, SystemPrompt: src.SystemPrompt,
		Title: src.Title, Metadata: src.Metadata, Replies: src.Replies, PendingPolicy: src.PendingPolicy}
	if opts.Created != nil {
		created = *opts.Created
	}
	msgs := make([]events.Message, len(src.Messages))
	for i, m := range src.Messages {
		// The fork event stamps its own sequence on the messages; the
		// source's times are kept for audit.
		m.Seq, m.EventID = 0, ""
		msgs[i] = m
	}
	ntenant, nthread := opts.Tenant, opts.ThreadID
	if ntenant == "" {
		ntenant = tenant
	}
	if nthread == "" {
		nthread = c.cfg.NewThreadID()
	}
	byRef := events.Event{Payload: events.Forked{SourceTenant: tenant, SourceThread: thread, SourceSeq: src.Version,
		Created: created, ByReference: true}}
	ev := events.Event{Payload: events.Forked{SourceTenant: tenant, SourceThread: thread, SourceSeq: src.Version,
		Created: created, Messages: msgs, State: src.KV}}
	if opts.ByReference {
		ev = byRef
	}
	res, err := c.Append(ctx, ntenant, nthread, []events.Event{ev}, ExpectVersion(0))
	var tooLarge *TooLargeError
	if !opts.ByReference && errors.As(err, &tooLarge) {
		// The copy does not fit in one event (refused before publishing).
		res, err = c.Append(ctx, ntenant, nthread, []events.Event{byRef}, ExpectVersion(0))
	}
	var conflict *ConflictError
	if errors.As(err, &conflict) {
		// A retry of this fork (same new id): the thread is already the
		// fork of the same source at the same sequence.
		if th, gerr := c.Get(ctx, ntenant, nthread, Consistent(), IncludeDeleted()); gerr == nil && th.ForkedFrom != nil &&
			th.ForkedFrom.Tenant == tenant && th.ForkedFrom.Thread == thread && th.ForkedFrom.Seq == src.Version {
			return ntenant, nthread, th.Version, nil
		}
		return ntenant, nthread, conflict.Actual, errors.Join(ErrThreadExists, err)
	}
	if err != nil {
		return ntenant, nthread, 0, err
	}
	return ntenant, nthread, res.Version, nil
}

// Delete soft-deletes a thread: it is hidden from Get (unless
// IncludeDeleted) and List, kept for audit, and can be undeleted. Further
// appends are rejected until then. It is idempotent: a thread already
// deleted is left as it is and its version returned (nothing is written).
// Errors: *NotFoundError for a thread with no events or an erased one;
// append errors.
func (c *Client) Delete(ctx context.Context, tenant, thread, reason string) (uint64, error) {
	if p := c.route(tenant, thread); p != c {
		return p.Delete(ctx, tenant, thread, reason)
	}
	return c.setDeleted(ctx, tenant, thread, true, events.Deleted{Reason: reason})
}

// Undelete reverses a soft delete; idempotent as Delete (a thread that is
// not deleted is left as it is).
func (c *Client) Undelete(ctx context.Context, tenant, thread, reason string) (uint64, error) {
	if p := c.route(tenant, thread); p != c {
		return p.Undelete(ctx, tenant, thread, reason)
	}
	return c.setDeleted(ctx, tenant, thread, false, events.Undeleted{Reason: reason})
}

// setDeleted appends p unless the thread is already in the wanted state,
// read consistently; a concurrent change between the read and the append
// is resolved by the fold, whose rejection (already in that state) is
// answered with the thread's version as well.
func (c *Client) setDeleted(ctx context.Context, tenant, thread string, want bool, p events.Payload) (uint64, error) {
	th, err := c.Get(ctx, tenant, thread, Consistent(), IncludeDeleted())
	if err != nil {
		return 0, err
	}
	if th.Deleted == want {
		return th.Version, nil
	}
	res, err := c.Append(ctx, tenant, thread, []events.Event{{Payload: p}}, AnyVersion())
	if errors.Is(err, fold.ErrRejected) {
		if th, gerr := c.Get(ctx, tenant, thread, Consistent(), IncludeDeleted()); gerr == nil && th.Deleted == want {
			return th.Version, nil
		}
	}
	return res.Version, err
}

// ErasureReport names what Erase removed.
type ErasureReport struct {
	Tenant, Thread string
	// RemovedEvents is the number of events purged from the stream.
	RemovedEvents uint64
	// LastSeq is the thread's version before erasure.
	LastSeq uint64
	// SnapshotKeys and IndexKeys are the KV keys purged.
	SnapshotKeys []string
	IndexKeys    []string
	// Blobs are the object names of the blobs deleted (every lifetime's).
	Blobs []string
	// Forks are the tenant's forks by reference of the thread (and their
	// forks by reference) whose snapshots were purged: read from their
	// logs again, they inherit nothing from the erased thread.
	Forks []string
	// KeyDestroyed is true when the thread's data key (package threadkey)
	// was destroyed by this call: everything sealed with it (events,
	// snapshot values, index entries, blobs, wherever JetStream left their
	// bytes) can no longer be read. False when the thread never had one
	// (its content was written in the clear, Config.ClearPayloads or a
	// writer without keys: its bytes may stay on disk, docs/audit.md).
	KeyDestroyed bool
}

// Erase irreversibly removes a thread: it purges the thread's events from
// the stream (the only physical removal convlog does, docs/design.md invariant
// 1), leaves a thread.erased marker naming what was removed, and purges the
// thread's snapshot and index keys and deletes its blobs (every lifetime's),
// and destroys the thread's data key (threadkey.Keys.Destroy: JetStream's
// secure delete), so that no copy of its sealed content anywhere on disk
// can be read again. Readers get ErrThreadNotFound after it.
// Other threads are untouched. Erasing an erased or missing thread returns
// *NotFoundError (after destroying a key an interrupted erasure left).
func (c *Client) Erase(ctx context.Context, tenant, thread, reason string) (ErasureReport, error) {
	if p := c.route(tenant, thread); p != c {
		return p.Erase(ctx, tenant, thread, reason)
	}
	if err := c.scopedErr("erase"); err != nil {
		return ErasureReport{}, err
	}
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return ErasureReport{}, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	last, err := c.lastSeq(ctx, subject)
	if err != nil {
		return ErasureReport{}, err
	}
	rep := ErasureReport{Tenant: tenant, Thread: thread, LastSeq: last}
	if last == 0 {
		return rep, &NotFoundError{Tenant: tenant, Thread: thread}
	}
	if m, err := c.st.GetMsg(ctx, last); err == nil && m.Header.Get(events.HeaderType) == string(events.TypeErased) {
		// Erased already when the marker is all that is stored; a marker
		// after stored events was published by hand and hides nothing.
		if first, err := c.log.next(ctx, subject, 1); err == nil && first != nil && first.Sequence == last {
			rep.KeyDestroyed, _ = c.keys.Destroy(ctx, tenant, thread)
			return rep, &NotFoundError{Tenant: tenant, Thread: thread, Reason: "already erased", Cause: ErrThreadErased}
		}
	}
	info, err := c.st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err == nil {
		rep.RemovedEvents = info.State.Subjects[subject]
	}
	if err := c.st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return rep, fmt.Errorf("client: erase %s/%s: purge: %w", tenant, thread, err)
	}
	c.cache.drop(threadRef{tenant, thread})
	if rep.KeyDestroyed, err = c.keys.Destroy(ctx, tenant, thread); err != nil {
		return rep, fmt.Errorf("client: erase %s/%s: events purged, data key not destroyed: %w", tenant, thread, err)
	}
	marker := events.Event{Payload: events.Erased{RemovedEvents: rep.RemovedEvents, LastSeq: last, Reason: reason}}
	if _, err := c.Append(ctx, tenant, thread, []events.Event{marker}, ExpectVersion(0)); err != nil && !errors.Is(err, fold.ErrRejected) {
		return rep, fmt.Errorf("client: erase %s/%s: events purged, marker not written: %w", tenant, thread, err)
	}
	purged, err := snapstore.PurgeThread(ctx, c.js, c.snapshots, c.index, tenant, thread)
	rep.SnapshotKeys, rep.IndexKeys = purged.SnapshotKeys, purged.IndexKeys
	if err != nil {
		return rep, fmt.Errorf("client: erase %s/%s: %w", tenant, thread, err)
	}
	c.cache.drop(threadRef{tenant, thread})
	if rep.Blobs, err = c.eraseBlobs(ctx, tenant, thread); err != nil {
		return rep, fmt.Errorf("client: erase %s/%s: events purged, blobs: %w", tenant, thread, err)
	}
	if rep.Forks, err = c.dropForkSnapshots(ctx, tenant, thread); err != nil {
		return rep, fmt.Errorf("client: erase %s/%s: events purged, forks by reference: %w", tenant, thread, err)
	}
	return rep, nil
}

// dropForkSnapshots purges the snapshots of the tenant's forks by
// reference of tenant/thread, and of their own forks by reference, so that
// they are read from their logs again, where the erased source gives them
// nothing (ForkRef.SourceErased). It returns the forks whose snapshots it
// purged. Forks in other tenants are not found (the index is per tenant).
func (c *Client) dropForkSnapshots(ctx context.Context, tenant, thread string) ([]string, error) {
	// One listing: the forks by reference of each thread of the tenant.
	children := map[string][]string{}
	for s, err := range c.ListAll(ctx, tenant, ListOptions{IncludeDeleted: true}) {
		if err != nil {
			return nil, err
		}
		if f := s.ForkedFrom; f != nil && f.ByReference && f.Tenant == tenant {
			children[f.Thread] = append(children[f.Thread], s.Thread)
		}
	}
	var forks []string
	seen := map[string]bool{thread: true}
	for todo := children[thread]; len(todo) > 0; {
		fork := todo[0]
		todo = todo[1:]
		if seen[fork] {
			continue
		}
		seen[fork] = true
		if _, err := snapstore.PurgeSnapshot(ctx, c.js, c.snapshots, tenant, fork); err != nil {
			return forks, err
		}
		c.cache.drop(threadRef{tenant, fork})
		forks = append(forks, fork)
		todo = append(todo, children[fork]...)
	}
	return forks, nil
}

// SetState sets a key of the thread's key-value state (AgentKit state.kv)
// with an event; value is any JSON-marshalable value.
func (c *Client) SetState(ctx context.Context, tenant, thread, key string, value any) (uint64, error) {
	if p := c.route(tenant, thread); p != c {
		return p.SetState(ctx, tenant, thread, key, value)
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return 0, fmt.Errorf("client: state %q of %s/%s: %w", key, tenant, thread, err)
	}
	res, err := c.Append(ctx, tenant, thread, []events.Event{{Payload: events.StateSet{Key: key, Value: raw}}}, AnyVersion())
	return res.Version, err
}

// DeleteState deletes a key of the thread's key-value state.
func (c *Client) DeleteState(ctx context.Context, tenant, thread, key string) (uint64, error) {
	if p := c.route(tenant, thread); p != c {
		return p.DeleteState(ctx, tenant, thread, key)
	}
	res, err := c.Append(ctx, tenant, thread, []events.Event{{Payload: events.StateDeleted{Key: key}}}, AnyVersion())
	return res.Version, err
}
