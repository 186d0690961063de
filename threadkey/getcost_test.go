package threadkey_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/benchtest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/threadkey"
)

// BenchmarkOpenSnapshotVsKVGet sets what opening a 1,000-message thread's
// snapshot costs (three sealed chunks of 200 KiB, about what a cold Get
// reads) against the limit a Get is measured by, one raw KV get of the
// same bytes, in the same run: each round times the raw get, the three
// chunks' gets and their opening, with OpenValue (a copy) and with
// OpenValueInPlace, and the metrics are the medians over rounds
// (open/raw-get is the share of the raw get that opening adds).
//
//	go test ./threadkey -run '^$' -bench BenchmarkOpenSnapshotVsKVGet -benchtime 200x
func BenchmarkOpenSnapshotVsKVGet(b *testing.B) {
	s, r := natstest.Provisioned(b, provision.Config{})
	ctx := context.Background()
	k, err := threadkey.New(ctx, s.JS, r.Keys, 0)
	require.NoError(b, err)
	chunk := []byte(strings.Repeat("0123456789abcdef", 200<<10/16))
	places := []string{"acme.t.c.1.0.333", "acme.t.c.1.333.333", "acme.t.c.1.666.334"}
	for _, p := range places {
		v, err := k.SealValue(ctx, "acme", "t", p, chunk)
		require.NoError(b, err)
		_, err = r.Snapshots.Put(ctx, p, v)
		require.NoError(b, err)
	}
	_, err = r.Snapshots.Put(ctx, "acme.t.raw", []byte(strings.Repeat(string(chunk), len(places))))
	require.NoError(b, err)

	var raw, gets, opens, inPlace []float64
	for b.Loop() {
		start := time.Now()
		_, err := r.Snapshots.Get(ctx, "acme.t.raw")
		require.NoError(b, err)
		raw = append(raw, float64(time.Since(start)))

		start = time.Now()
		values := make([][]byte, len(places))
		for i, p := range places {
			e, err := r.Snapshots.Get(ctx, p)
			require.NoError(b, err)
			values[i] = e.Value()
		}
		gets = append(gets, float64(time.Since(start)))

		start = time.Now()
		for i, p := range places {
			_, err := k.OpenValue(ctx, "acme", "t", p, values[i])
			require.NoError(b, err)
		}
		opens = append(opens, float64(time.Since(start)))

		start = time.Now()
		for i, p := range places {
			_, err := k.OpenValueInPlace(ctx, "acme", "t", p, values[i])
			require.NoError(b, err)
		}
		inPlace = append(inPlace, float64(time.Since(start)))
	}
	times := map[string][]float64{"raw": raw, "gets": gets, "opens": opens, "in-place": inPlace}
	b.ReportMetric(threadkey.Ratio(times, "opens", "raw"), "open/raw-get")
	b.ReportMetric(threadkey.Ratio(times, "in-place", "raw"), "open-in-place/raw-get")
	b.ReportMetric(threadkey.Ratio(times, "gets", "raw"), "chunk-gets/raw-get")
	b.ReportMetric(benchtest.Median(raw), "ns/raw-get")
	b.ReportMetric(benchtest.Median(opens), "ns/open")
	b.ReportMetric(benchtest.Median(inPlace), "ns/open-in-place")
}
