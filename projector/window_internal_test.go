package projector

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The delivery window vouches for a thread's previous event only inside a
// run of consecutive consumer sequences with rising stream sequences, and
// forgets everything when the run ends.
func TestDeliveryWindow(t *testing.T) {
	type d struct {
		key                  string
		cons, seq, delivered uint64
		bad                  bool // metadata did not parse
		prev                 uint64
		known                bool
	}
	cases := []struct {
		name string
		ds   []d
	}{
		{"a run proves each thread's previous event", []d{
			{key: "a", cons: 1, seq: 10, delivered: 1},
			{key: "b", cons: 2, seq: 11, delivered: 1},
			{key: "a", cons: 3, seq: 12, delivered: 1, prev: 10, known: true},
			{key: "a", cons: 4, seq: 15, delivered: 1, prev: 12, known: true}, // 13, 14 deleted or not in the filter
			{key: "b", cons: 5, seq: 16, delivered: 1, prev: 11, known: true},
		}},
		{"a gap in consumer sequences ends the run", []d{
			{key: "a", cons: 1, seq: 10, delivered: 1},
			{key: "a", cons: 3, seq: 12, delivered: 1}, // cons 2 went to another instance
			{key: "a", cons: 4, seq: 13, delivered: 1, prev: 12, known: true},
		}},
		{"the first delivery starts a run even at consumer sequence 1", []d{
			{key: "a", cons: 7, seq: 10, delivered: 1},
			{key: "a", cons: 8, seq: 11, delivered: 1, prev: 10, known: true},
		}},
		{"a redelivery keeps the run but vouches for nothing", []d{
			{key: "a", cons: 1, seq: 10, delivered: 1},
			{key: "a", cons: 2, seq: 10, delivered: 2},
			{key: "a", cons: 3, seq: 11, delivered: 1, prev: 10, known: true},
		}},
		{"a first delivery whose stream sequence does not rise ends the run", []d{
			{key: "a", cons: 1, seq: 10, delivered: 1},
			{key: "b", cons: 2, seq: 11, delivered: 1},
			{key: "a", cons: 3, seq: 9, delivered: 1}, // a consumer reset
			{key: "a", cons: 4, seq: 12, delivered: 1, prev: 9, known: true},
			{key: "b", cons: 5, seq: 13, delivered: 1}, // b's 11 was seen in the old run only
		}},
		{"metadata that does not parse ends the run", []d{
			{key: "a", cons: 1, seq: 10, delivered: 1},
			{bad: true},
			{key: "a", cons: 3, seq: 12, delivered: 1},
			{key: "a", cons: 4, seq: 13, delivered: 1, prev: 12, known: true},
		}},
		{"a subject that is no thread keeps the run", []d{
			{key: "a", cons: 1, seq: 10, delivered: 1},
			{key: "", cons: 2, seq: 11, delivered: 1},
			{key: "a", cons: 3, seq: 12, delivered: 1, prev: 10, known: true},
		}},
		{"a consumer sequence that goes back ends the run", []d{
			{key: "a", cons: 5, seq: 10, delivered: 1},
			{key: "a", cons: 6, seq: 11, delivered: 1, prev: 10, known: true},
			{key: "a", cons: 3, seq: 12, delivered: 1},
			{key: "a", cons: 4, seq: 13, delivered: 1, prev: 12, known: true},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newDeliveryWindow()
			for i, x := range tc.ds {
				prev, known := w.observe(x.key, x.cons, x.seq, x.delivered, !x.bad)
				require.Equal(t, x.known, known, "delivery %d: known", i)
				require.Equal(t, x.prev, prev, "delivery %d: prev", i)
			}
		})
	}
}

// Past maxWindowThreads threads, a forgotten thread is unknown again, never
// wrong.
func TestDeliveryWindowBounded(t *testing.T) {
	w := newDeliveryWindow()
	cons := uint64(0)
	seq := uint64(100)
	next := func(key string) (uint64, bool) {
		cons++
		seq++
		return w.observe(key, cons, seq, 1, true)
	}
	seen := map[string]uint64{}
	for i := range maxWindowThreads + 1000 {
		k := fmt.Sprintf("t%d", i)
		_, known := next(k)
		require.False(t, known)
		seen[k] = seq
	}
	require.LessOrEqual(t, len(w.last), maxWindowThreads)
	forgotten := 0
	for i := range maxWindowThreads + 1000 {
		k := fmt.Sprintf("t%d", i)
		want := seen[k]
		prev, known := next(k)
		seen[k] = seq
		if !known {
			forgotten++
			continue
		}
		require.Equal(t, want, prev, "thread %s", k)
	}
	require.Positive(t, forgotten)
}
