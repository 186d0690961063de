package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Dist summarizes a set of latencies. The zero value means "not measured".
type Dist struct {
	N    int           `json:"n"`
	P50  time.Duration `json:"p50"`
	P99  time.Duration `json:"p99"`
	Max  time.Duration `json:"max"`
	Mean time.Duration `json:"mean"`
}

// Measured reports whether d holds at least one sample.
func (d Dist) Measured() bool { return d.N > 0 }

// distOf summarizes samples (it sorts a copy). Percentiles are nearest-rank.
func distOf(samples []time.Duration) Dist {
	if len(samples) == 0 {
		return Dist{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return Dist{N: len(s), P50: rank(s, 0.50), P99: rank(s, 0.99), Max: s[len(s)-1], Mean: sum / time.Duration(len(s))}
}

// rank returns the nearest-rank percentile p (0..1) of sorted s.
func rank(s []time.Duration, p float64) time.Duration {
	i := int(float64(len(s))*p+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// median returns the median of xs (0 when empty).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianDur is the median of ds (0 when empty).
func medianDur(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}

// fmtDur formats a latency with a unit that keeps three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.2f µs", float64(d)/float64(time.Microsecond))
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// fmtRate formats a per-second rate.
func fmtRate(r float64) string {
	switch {
	case r <= 0:
		return "–"
	case r >= 1e6:
		return fmt.Sprintf("%.2fM/s", r/1e6)
	case r >= 1e4:
		return fmt.Sprintf("%.0fk/s", r/1e3)
	case r >= 1e3:
		return fmt.Sprintf("%.1fk/s", r/1e3)
	}
	return fmt.Sprintf("%.0f/s", r)
}

// fmtBytes formats a byte count in binary units.
func fmtBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ratio formats a/b as "1.23x", or "–" when either is missing.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "–"
	}
	r := a / b
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0fx", r)
	case r >= 10:
		return fmt.Sprintf("%.1fx", r)
	}
	return fmt.Sprintf("%.2fx", r)
}

// durRatio is ratio for latencies.
func durRatio(a, b time.Duration) string { return ratio(float64(a), float64(b)) }

// fmtInt formats n with thousands separators: 100000 -> "100,000".
func fmtInt[T ~int | ~int64 | ~uint64](n T) string {
	s := fmt.Sprintf("%d", n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Spread is a ratio measured once per round (rounds interleave the systems
// it compares): the median over the rounds, the lowest and the highest,
// and the geometric mean (the exponential of the mean logarithm: every
// round counts, one far round by its share). The zero value means "not
// measured"; Geomean is 0 in the results of runs before it was recorded.
type Spread struct {
	Rounds  []float64 `json:"rounds"`
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Geomean float64   `json:"geomean,omitempty"`
}

// Measured reports whether s holds at least one round.
func (s Spread) Measured() bool { return len(s.Rounds) > 0 }

// spreadOf summarizes per-round ratios, leaving out rounds without one (0).
func spreadOf(xs []float64) Spread {
	var s Spread
	for _, x := range xs {
		if x > 0 {
			s.Rounds = append(s.Rounds, x)
		}
	}
	if len(s.Rounds) == 0 {
		return Spread{}
	}
	s.Median, s.Min, s.Max = median(s.Rounds), slices.Min(s.Rounds), slices.Max(s.Rounds)
	var logs float64
	for _, x := range s.Rounds {
		logs += math.Log(x)
	}
	s.Geomean = math.Exp(logs / float64(len(s.Rounds)))
	return s
}

// typical is s's geometric mean, or its median in the results of runs
// before the geometric mean was recorded.
func (s Spread) typical() float64 { return cmp.Or(s.Geomean, s.Median) }

// fmtGeoSpread formats s as "1.23x (geometric mean; median 1.20x,
// 1.10-1.40x over 5 rounds)", or as fmtSpread does when s holds one round
// or no geometric mean.
func fmtGeoSpread(s Spread) string {
	if !s.Measured() || len(s.Rounds) == 1 || s.Geomean == 0 {
		return fmtSpread(s)
	}
	return fmt.Sprintf("%s (geometric mean; median %s, %s-%s over %d rounds)", ratio(s.Geomean, 1), ratio(s.Median, 1),
		strings.TrimSuffix(ratio(s.Min, 1), "x"), ratio(s.Max, 1), len(s.Rounds))
}

// p50Ratios returns the spread of the ratio of a's p50 to b's, round by
// round; a and b hold each round's latencies.
func p50Ratios(a, b [][]time.Duration) Spread {
	xs := make([]float64, min(len(a), len(b)))
	for i := range xs {
		x, y := distOf(a[i]).P50, distOf(b[i]).P50
		if x > 0 && y > 0 {
			xs[i] = float64(x) / float64(y)
		}
	}
	return spreadOf(xs)
}

// fmtSpread formats s as "1.23x (1.10-1.40x over 5 rounds)", as "1.23x"
// when it holds one round and as "–" when not measured.
func fmtSpread(s Spread) string {
	if !s.Measured() {
		return "–"
	}
	if len(s.Rounds) == 1 {
		return ratio(s.Median, 1)
	}
	return fmt.Sprintf("%s (%s-%s over %d rounds)", ratio(s.Median, 1), strings.TrimSuffix(ratio(s.Min, 1), "x"), ratio(s.Max, 1), len(s.Rounds))
}
