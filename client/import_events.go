package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// EventsImportReport says what [Client.ImportEvents] stored.
type EventsImportReport struct {
	Threads  int `json:"threads"`
	Events   int `json:"events"`
	Already  int `json:"already_present"`
	Rejected int `json:"rejected"`
	// Reasons counts rejections by the fold's code (or "undecodable").
	Reasons map[string]int `json:"reasons,omitempty"`
}

// ImportEvents reads JSONL written by `export --format events` (one stored
// event per line, threads one after another) and appends each thread's
// events in their original order, keeping their ids, so importing the same
// file twice stores nothing twice. Sequences are assigned anew by the
// target stream; a compaction's up_to_seq is translated to the new
// sequence of the same event. Events the fold rejects (as they were in the
// source, e.g. undecodable bytes) are skipped and counted. Runs of a
// thread's events are appended atomically, up to [MaxTurnEvents] at a time.
//
// tenant, when not empty, replaces the events' tenant. Event ids are
// de-duplicated stream-wide by the server within its duplicate window, so
// this moves threads between deployments; a copy into the deployment the
// events came from (another tenant) within the window is refused with an
// error naming the ids.
func (c *Client) ImportEvents(ctx context.Context, r io.Reader, tenant string) (EventsImportReport, error) {
	rep := EventsImportReport{Reasons: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var cur []events.Stored
	curKey := ""
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		err := c.importThreadEvents(ctx, cur, &rep)
		cur = cur[:0]
		return err
	}
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var st events.Stored
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			rep.Rejected++
			rep.Reasons["undecodable"]++
			continue
		}
		if tenant != "" {
			st.Tenant = tenant
		}
		key := st.Tenant + "." + st.Thread
		if key != curKey {
			if err := flush(); err != nil {
				return rep, fmt.Errorf("line %d: %w", line, err)
			}
			curKey = key
		}
		cur = append(cur, st)
	}
	if err := sc.Err(); err != nil {
		return rep, err
	}
	if err := flush(); err != nil {
		return rep, err
	}
	if len(rep.Reasons) == 0 {
		rep.Reasons = nil
	}
	return rep, nil
}

func (c *Client) importThreadEvents(ctx context.Context, evs []events.Stored, rep *EventsImportReport) error {
	tenant, thread := evs[0].Tenant, evs[0].Thread
	c = c.route(tenant, thread)
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return err
	}
	rep.Threads++
	// Events an earlier import already stored, by id (any age: the
	// server's duplicate window is not enough).
	existing := map[string]uint64{}
	var version uint64
	for m, err := range c.readRaw(ctx, subject, 1, 0) {
		if err != nil {
			return err
		}
		existing[m.Header.Get(events.HeaderMsgID)] = m.Sequence
		version = m.Sequence
	}
	seqMap := map[uint64]uint64{}
	var todo []events.Stored
	for _, st := range evs {
		if seq, ok := existing[st.ID]; ok {
			seqMap[st.Seq] = seq
			rep.Events++
			rep.Already++
			continue
		}
		todo = append(todo, st)
	}
	appendRun := func(run []events.Stored) error {
		batch := make([]events.Event, len(run))
		for i, st := range run {
			ev := st.Event
			if p, ok := ev.Payload.(events.Compaction); ok {
				if n, ok := seqMap[p.UpToSeq]; ok {
					p.UpToSeq = n
					ev.Payload = p
				}
			}
			batch[i] = ev
		}
		res, err := c.Append(ctx, tenant, thread, batch, ExpectVersion(version))
		if err != nil {
			return err
		}
		for i, st := range res.Events {
			seqMap[run[i].Seq] = st.Seq
		}
		version = res.Version
		rep.Events += len(run)
		return nil
	}
	for start := 0; start < len(todo); start += MaxTurnEvents {
		run := todo[start:min(start+MaxTurnEvents, len(todo))]
		err := appendRun(run)
		var rej *fold.RejectionError
		if err == nil {
			continue
		}
		if !errors.As(err, &rej) {
			return err
		}
		// A rejected event inside the run: go one event at a time.
		for _, st := range run {
			if err := appendRun([]events.Stored{st}); err != nil {
				if !errors.As(err, &rej) {
					return err
				}
				rep.Rejected++
				rep.Reasons[string(rej.Code)]++
			}
		}
	}
	return nil
}
