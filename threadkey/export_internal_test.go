package threadkey

// What the external test package's benchmarks share with the internal
// ones: one way to time operations interleaved in rounds and to sum the
// rounds up (interleave, ratio; the median is internal/benchtest's).
type BenchOp = benchOp

// NewBenchOp is the operation f under name.
func NewBenchOp(name string, f func()) BenchOp { return benchOp{name, f} }

var (
	Interleave = interleave
	Ratio      = ratio
)
