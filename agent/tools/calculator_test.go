package tools_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/tools"
)

func TestCalculateEvaluatesArithmetic(t *testing.T) {
	cases := []struct {
		expr string
		want string
	}{
		{"12*(3+4)", "84"},
		{"1 + 2 * 3", "7"},
		{"(1 + 2) * 3", "9"},
		{"10 - 4 - 3", "3"},
		{"100 / 10 / 5", "2"},
		{"-3 + 5", "2"},
		{"--3", "3"},
		{"-(2+3)*2", "-10"},
		{"+4", "4"},
		{"1.5 * 2", "3"},
		{".5 + .25", "0.75"},
		{"2.", "2"},
		{"0.1 + 0.2", "0.3"},
		{"1/3", "0.333333333333333"},
		{"  7  ", "7"},
		{"2 * -3", "-6"},
		{"1000000 * 1000000", "1000000000000"},
	}
	for _, c := range cases {
		t.Run(c.expr+" is "+c.want, func(t *testing.T) {
			v, err := tools.Calculate(c.expr)
			require.NoError(t, err)
			require.Equal(t, c.want, tools.FormatNumber(v))
		})
	}
}

func TestCalculateSaysWhatIsWrongAndWhere(t *testing.T) {
	long := make([]byte, tools.MaxExpressionLen+1)
	for i := range long {
		long[i] = '1'
	}
	deep := ""
	for range tools.MaxNesting + 1 {
		deep += "("
	}
	cases := []struct {
		name, expr, want string
	}{
		{"an empty expression", "  ", "the expression is empty"},
		{"a letter", "2 + x", `unexpected 'x' at position 5`},
		{"a non-ASCII operator", "3 × 4", `unexpected '×' at position 3`},
		{"a trailing operator", "2 +", "unexpected end of the expression at position 4"},
		{"a missing closing parenthesis", "(1 + 2", `missing ")" for the "(" at position 1`},
		{"an extra closing parenthesis", "1 + 2)", `unexpected ')' at position 6`},
		{"two numbers in a row", "1 2", `unexpected '2' at position 3`},
		{"a lone dot", ".", `unexpected '.' at position 1`},
		{"division by zero", "1 / (2 - 2)", "division by zero at position 3"},
		{"a too long expression", string(long), "the limit is 1000"},
		{"deep nesting", deep, "nested deeper than 100"},
		{"deep unary minus", repeat("-", 101) + "1", "nested deeper than 100"},
		{"an overflowing result", repeat("9", 300) + "*" + repeat("9", 300) + "*" + repeat("9", 300), "the result is too large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tools.Calculate(c.expr)
			require.ErrorContains(t, err, c.want)
		})
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

func TestFormatNumber(t *testing.T) {
	require.Equal(t, "0", tools.FormatNumber(0))
	require.Equal(t, "0", tools.FormatNumber(math.Copysign(0, -1)))
	require.Equal(t, "-2.5", tools.FormatNumber(-2.5))
	require.Equal(t, "100000000000000000000", tools.FormatNumber(1e20))
	require.Equal(t, "1e+21", tools.FormatNumber(1e21))
}

// FuzzCalculate: the parser never panics and returns a finite value or an
// error.
func FuzzCalculate(f *testing.F) {
	for _, s := range []string{"12*(3+4)", "-1.5/3", "((((1))))", "1/0", "", ")(", "1..2", "--", "9999999999999999999999*99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := tools.Calculate(s)
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("Calculate(%q) = %v without error", s, v)
		}
	})
}
