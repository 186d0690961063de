package projector_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

func mkMsgs(n int) []events.Message {
	ms := make([]events.Message, n)
	c := strings.Repeat("x", 512)
	for i := range ms {
		ms[i] = events.Message{Role: events.RoleUser, Content: events.Text(c), Seq: uint64(i + 10000), EventID: events.NewID(), Time: time.Now().UTC()}
	}
	return ms
}

func BenchmarkExpCodec(b *testing.B) {
	for _, n := range []int{100, 400, 1000} {
		ms := mkMsgs(n)
		var buf []byte
		b.Run(fmt.Sprintf("enc%d", n), func(b *testing.B) {
			for b.Loop() {
				var bb bytes.Buffer
				enc := msgpack.NewEncoder(&bb)
				enc.UseCompactInts(true)
				enc.Encode(ms)
				buf = bb.Bytes()
			}
			b.ReportMetric(float64(len(buf)), "bytes")
		})
		b.Run(fmt.Sprintf("dec%d", n), func(b *testing.B) {
			for b.Loop() {
				var out []events.Message
				if err := msgpack.Unmarshal(buf, &out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkExpKV(b *testing.B) {
	s, r := natstest.Provisioned(b, provision.Config{})
	_ = s
	ctx := context.Background()
	for _, sz := range []int{1 << 10, 64 << 10, 128 << 10, 256 << 10, 640 << 10} {
		val := bytes.Repeat([]byte("y"), sz)
		key := fmt.Sprintf("k%d", sz)
		b.Run(fmt.Sprintf("put%d", sz), func(b *testing.B) {
			for b.Loop() {
				if _, err := r.Snapshots.Put(ctx, key, val); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("get%d", sz), func(b *testing.B) {
			for b.Loop() {
				if _, err := r.Snapshots.Get(ctx, key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkExpChunks(b *testing.B) {
	s, r := natstest.Provisioned(b, provision.Config{})
	ctx := context.Background()
	for _, tc := range []struct{ n, sz int }{{3, 213 << 10}, {1, 640 << 10}, {20, 32 << 10}, {40, 256 << 10}} {
		val := bytes.Repeat([]byte("y"), tc.sz)
		pfx := fmt.Sprintf("t.th%d_%d", tc.n, tc.sz)
		var first uint64
		for i := 0; i < tc.n; i++ {
			rev, err := r.Snapshots.Create(ctx, fmt.Sprintf("%s.c.0.%d", pfx, i), val)
			if err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				first = rev
			}
		}
		b.Run(fmt.Sprintf("concurrent%dx%d", tc.n, tc.sz), func(b *testing.B) {
			for b.Loop() {
				errs := make(chan error, tc.n)
				for i := 0; i < tc.n; i++ {
					go func() {
						_, err := r.Snapshots.Get(ctx, fmt.Sprintf("%s.c.0.%d", pfx, i))
						errs <- err
					}()
				}
				for i := 0; i < tc.n; i++ {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("batched%dx%d", tc.n, tc.sz), func(b *testing.B) {
			for b.Loop() {
				it, err := jetstreamext.GetBatch(ctx, s.JS, "KV_convlog_snapshots", tc.n, jetstreamext.GetBatchSeq(first), jetstreamext.GetBatchSubject("$KV.convlog_snapshots."+pfx+".c.0.>"))
				if err != nil {
					b.Fatal(err)
				}
				k := 0
				for _, err := range it {
					if err != nil {
						b.Fatal(err)
					}
					k++
				}
				if k != tc.n {
					b.Fatal(k)
				}
			}
		})
	}
}
