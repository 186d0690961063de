package projector

// maxWindowThreads bounds the threads a deliveryWindow remembers; past it,
// one remembered thread is forgotten per new one (its next trigger is then
// checked against the log, as without the window).
const maxWindowThreads = 1 << 16

// deliveryWindow tells, for a trigger delivered to this instance, which
// event of the same thread came before it in the stream, when this
// instance saw it: the same fact the Nats-Expected-Last-Subject-Sequence
// header gives for conditional appends, derived here for plain publishes.
//
// Why it is exact. The consumer's delivery sequence (the consumer sequence
// in a message's metadata, $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.
// <cseq>...) grows by one with every delivery the consumer makes, to any
// instance, redeliveries included (nats-server consumer.deliverMsg); first
// deliveries (NumDelivered 1) go out in stream sequence order, each stream
// message matching the filter once. So while the deliveries this instance
// receives have consecutive consumer sequences and rising stream sequences,
// it has received every message stored between the first of them and the
// last (a message purged before delivery is not in the stream any more
// either). Within such a run, the last thread event seen before a trigger
// is the event before it on the thread's subject. Anything else (a gap in
// consumer sequences, because another instance got deliveries in between
// or deliveries were lost; a stream sequence that does not rise; a consumer
// reset by the server; metadata that does not parse) ends the run: what was
// remembered is forgotten (a new epoch) and the next triggers of each
// thread are checked against the log again.
//
// A deliveryWindow is used by the dispatching goroutine only; it is not
// safe for concurrent use.
type deliveryWindow struct {
	epoch    uint64 // the current run; 0 before any delivery
	lastCons uint64 // consumer sequence of the last delivery
	lastSeq  uint64 // stream sequence of the last first delivery in the run
	last     map[string]windowEntry
}

// windowEntry is the newest stream sequence seen of one thread, in a run.
type windowEntry struct {
	seq, epoch uint64
}

func newDeliveryWindow() *deliveryWindow {
	return &deliveryWindow{last: map[string]windowEntry{}}
}

// observe records one delivery: consumer sequence cons, stream sequence
// seq, delivery count delivered, on the thread with key key ("" for a
// subject that is no thread). ok is false when the metadata could not be
// read (the other arguments are ignored then). It returns the stream
// sequence of the thread's previous event and true when the current run
// proves it, else 0 and false (the first delivery of a thread in a run, a
// redelivery, or a delivery that ended the run).
func (w *deliveryWindow) observe(key string, cons, seq, delivered uint64, ok bool) (prev uint64, known bool) {
	if !ok {
		w.epoch++
		w.lastCons, w.lastSeq = 0, 0
		return 0, false
	}
	first := delivered == 1
	if w.lastCons == 0 || cons != w.lastCons+1 || first && seq <= w.lastSeq {
		w.epoch++ // a new run starts with this delivery
		w.lastSeq = 0
	}
	w.lastCons = cons
	if !first {
		// A redelivery: an older message, delivered again. It does not
		// break the run (its consumer sequence is the next one) and tells
		// nothing new.
		return 0, false
	}
	w.lastSeq = seq
	if key == "" {
		return 0, false
	}
	e, found := w.last[key]
	if found && e.epoch == w.epoch {
		prev, known = e.seq, true
	}
	if !found && len(w.last) >= maxWindowThreads {
		for k := range w.last { // forget one, at random
			delete(w.last, k)
			break
		}
	}
	w.last[key] = windowEntry{seq: seq, epoch: w.epoch}
	return prev, known
}
