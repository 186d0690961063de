package threadkey

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/convlog/convlog/events"
)

// benchEvent returns a new thread key and the clear encoding of a user
// message of 400 bytes with its payload's place: what the benchmarks seal
// and open.
func benchEvent(b *testing.B) (*threadKey, []byte, events.PayloadMember) {
	b.Helper()
	tk, err := newKey()
	if err != nil {
		b.Fatal(err)
	}
	clear, err := events.Marshal(events.New("acme", "t", "p", events.UserMessage{Content: events.Text(strings.Repeat("x", 400))}))
	if err != nil {
		b.Fatal(err)
	}
	pm, _ := events.LocatePayload(clear)
	return tk, clear, pm
}

// BenchmarkOpenEvent is what opening and sealing cost one event of about
// 500 bytes with its thread key in hand (no KV): the event key's
// derivation, the AEAD and the splice into or out of the clear encoding,
// for format 2 (what writers seal) and format 1 (what older events hold).
// Compare with events.Unmarshal of the same clear bytes
// (BenchmarkOpenEvent/decode). -count repeats the set, so the formats'
// runs alternate.
//
//	go test ./threadkey -run '^$' -bench BenchmarkOpenEvent -benchmem -count 5
func BenchmarkOpenEvent(b *testing.B) {
	tk, clear, pm := benchEvent(b)
	for _, f := range []struct {
		name string
		seal func(*threadKey, []byte, events.PayloadMember) ([]byte, error)
	}{{"v2", sealEvent}, {"v1", sealEventV1}} {
		sealed, err := f.seal(tk, clear, pm)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("open-"+f.name, func(b *testing.B) {
			b.SetBytes(int64(len(sealed)))
			for b.Loop() {
				spm, err := events.LocatePayload(sealed)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := openEvent(tk, sealed, spm); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("seal-"+f.name, func(b *testing.B) {
			b.SetBytes(int64(len(clear)))
			for b.Loop() {
				cpm, err := events.LocatePayload(clear)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.seal(tk, clear, cpm); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(clear)))
		for b.Loop() {
			if _, err := events.Unmarshal(clear); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFormatRatio sets format 2 against format 1 in one run, as
// ratios that hold on a busy machine: each round times a block of opens
// and of seals of each format back to back, and the metrics are the
// medians over rounds of the per-round ratios (open-v2/v1, seal-v2/v1)
// and of the per-operation times (ns/open-v2 ...).
//
//	go test ./threadkey -run '^$' -bench BenchmarkFormatRatio -benchtime 2000x
func BenchmarkFormatRatio(b *testing.B) {
	tk, clear, pm := benchEvent(b)
	seal := func(f func(*threadKey, []byte, events.PayloadMember) ([]byte, error)) func() {
		return func() {
			cpm, _ := events.LocatePayload(clear)
			if _, err := f(tk, clear, cpm); err != nil {
				b.Fatal(err)
			}
		}
	}
	open := func(f func(*threadKey, []byte, events.PayloadMember) ([]byte, error)) func() {
		sealed, err := f(tk, clear, pm)
		if err != nil {
			b.Fatal(err)
		}
		return func() {
			spm, _ := events.LocatePayload(sealed)
			if _, err := openEvent(tk, sealed, spm); err != nil {
				b.Fatal(err)
			}
		}
	}
	ops := []struct {
		name string
		f    func()
	}{
		{"open-v1", open(sealEventV1)}, {"open-v2", open(sealEvent)},
		{"seal-v1", seal(sealEventV1)}, {"seal-v2", seal(sealEvent)},
		{"decode", func() {
			if _, err := events.Unmarshal(clear); err != nil {
				b.Fatal(err)
			}
		}},
	}
	const block = 32
	times := map[string][]float64{}
	for b.Loop() {
		for _, op := range ops {
			start := time.Now()
			for range block {
				op.f()
			}
			times[op.name] = append(times[op.name], float64(time.Since(start).Nanoseconds())/block)
		}
	}
	ratio := func(a, c string) float64 {
		r := make([]float64, len(times[a]))
		for i := range r {
			r[i] = times[a][i] / times[c][i]
		}
		return median(r)
	}
	b.ReportMetric(ratio("open-v2", "open-v1"), "open-v2/v1")
	b.ReportMetric(ratio("seal-v2", "seal-v1"), "seal-v2/v1")
	b.ReportMetric(ratio("open-v2", "decode"), "open-v2/decode")
	for _, op := range ops {
		b.ReportMetric(median(times[op.name]), "ns/"+op.name)
	}
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	x = slices.Clone(x)
	slices.Sort(x)
	return x[len(x)/2]
}

// BenchmarkOpenValues is what a cold Get of a 1,000-message thread spends
// opening its snapshot: about 605 KiB in a head and chunks, here three
// values of 200 KiB. "open" is OpenValue's work (AES-GCM into a new
// buffer); "open-reused" the same into a buffer kept across calls, which
// shows what allocating (and zeroing) the plaintext costs; "copy" only
// copies the bytes into a new buffer, the least a reader that keeps them
// pays.
//
//	go test ./threadkey -run '^$' -bench BenchmarkOpenValues -benchmem
func BenchmarkOpenValues(b *testing.B) {
	tk, err := newKey()
	if err != nil {
		b.Fatal(err)
	}
	plain := []byte(strings.Repeat("0123456789abcdef", 200<<10/16))
	places := []string{"acme.t.c.1.0.333", "acme.t.c.1.333.333", "acme.t.c.1.666.334"}
	sealed := make([][]byte, len(places))
	total := 0
	for i, p := range places {
		if sealed[i], err = sealValue(tk, p, plain); err != nil {
			b.Fatal(err)
		}
		total += len(plain)
	}
	b.Run("open", func(b *testing.B) {
		b.SetBytes(int64(total))
		for b.Loop() {
			for i, p := range places {
				if _, err := openValue(tk, p, sealed[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("open-reused", func(b *testing.B) {
		b.SetBytes(int64(total))
		buf := make([]byte, 0, len(plain))
		for b.Loop() {
			for i, p := range places {
				v := sealed[i]
				if _, err := tk.value.Open(buf[:0], v[2+idLen:2+idLen+nonceLen], v[2+idLen+nonceLen:], valueAD(p)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(total))
		for b.Loop() {
			for i := range places {
				_ = bytes.Clone(sealed[i])
			}
		}
	})
}
