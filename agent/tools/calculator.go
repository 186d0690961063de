package tools

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Limits of [Calculate].
const (
	MaxExpressionLen = 1000
	MaxNesting       = 100
)

// Calculate evaluates an arithmetic expression:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/") unary }
//	unary   = ("-" | "+") unary | primary
//	primary = number | "(" expr ")"
//	number  = digits [ "." digits ] | "." digits
//
// with spaces allowed between tokens, in float64. It is a recursive-descent
// parser with no access to anything but the expression. Errors say what is
// wrong and where (1-based character position): an empty expression, an
// unexpected character or end, a missing ")", division by zero, a result
// that is not finite, an expression longer than [MaxExpressionLen] bytes or
// nested deeper than [MaxNesting].
func Calculate(expr string) (float64, error) {
	if len(expr) > MaxExpressionLen {
		return 0, fmt.Errorf("the expression is %d bytes, the limit is %d", len(expr), MaxExpressionLen)
	}
	p := &parser{s: expr}
	p.skip()
	if p.i == len(p.s) {
		return 0, fmt.Errorf("the expression is empty")
	}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	if p.i < len(p.s) {
		return 0, p.unexpected()
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("the result is too large")
	}
	return v, nil
}

// FormatNumber writes v in plain decimal notation rounded to 15
// significant digits (so 0.1+0.2 gives "0.3"), and in exponent notation
// only from 1e21 up.
func FormatNumber(v float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 15, 64), 64)
	if r == 0 {
		return "0"
	}
	if math.Abs(r) >= 1e21 {
		return strconv.FormatFloat(r, 'g', -1, 64)
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

type parser struct {
	s     string
	i     int
	depth int
}

func (p *parser) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// pos is the 1-based character position of p.i.
func (p *parser) pos() int { return utf8.RuneCountInString(p.s[:p.i]) + 1 }

func (p *parser) unexpected() error {
	if p.i >= len(p.s) {
		return fmt.Errorf("unexpected end of the expression at position %d", p.pos())
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.i:])
	return fmt.Errorf("unexpected %q at position %d", r, p.pos())
}

func (p *parser) expr() (float64, error) {
	v, err := p.term()
	if err != nil {
		return 0, err
	}
	for p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
		op := p.s[p.i]
		p.i++
		p.skip()
		w, err := p.term()
		if err != nil {
			return 0, err
		}
		if op == '+' {
			v += w
		} else {
			v -= w
		}
	}
	return v, nil
}

func (p *parser) term() (float64, error) {
	v, err := p.unary()
	if err != nil {
		return 0, err
	}
	for p.i < len(p.s) && (p.s[p.i] == '*' || p.s[p.i] == '/') {
		op, at := p.s[p.i], p.pos()
		p.i++
		p.skip()
		w, err := p.unary()
		if err != nil {
			return 0, err
		}
		if op == '*' {
			v *= w
		} else {
			if w == 0 {
				return 0, fmt.Errorf("division by zero at position %d", at)
			}
			v /= w
		}
	}
	return v, nil
}

func (p *parser) unary() (float64, error) {
	if p.i < len(p.s) && (p.s[p.i] == '-' || p.s[p.i] == '+') {
		neg := p.s[p.i] == '-'
		if p.depth++; p.depth > MaxNesting {
			return 0, fmt.Errorf("the expression is nested deeper than %d at position %d", MaxNesting, p.pos())
		}
		defer func() { p.depth-- }()
		p.i++
		p.skip()
		v, err := p.unary()
		if neg {
			v = -v
		}
		return v, err
	}
	return p.primary()
}

func (p *parser) primary() (float64, error) {
	if p.i >= len(p.s) {
		return 0, p.unexpected()
	}
	if p.s[p.i] == '(' {
		open := p.pos()
		if p.depth++; p.depth > MaxNesting {
			return 0, fmt.Errorf("the expression is nested deeper than %d at position %d", MaxNesting, open)
		}
		defer func() { p.depth-- }()
		p.i++
		p.skip()
		v, err := p.expr()
		if err != nil {
			return 0, err
		}
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			if p.i >= len(p.s) {
				return 0, fmt.Errorf("missing \")\" for the \"(\" at position %d", open)
			}
			return 0, p.unexpected()
		}
		p.i++
		p.skip()
		return v, nil
	}
	return p.number()
}

func (p *parser) number() (float64, error) {
	start := p.i
	digits := 0
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
		digits++
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			digits++
		}
	}
	if digits == 0 {
		p.i = start
		return 0, p.unexpected()
	}
	text := p.s[start:p.i]
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		p.i = start
		return 0, fmt.Errorf("the number at position %d is too large (%d digits)", p.pos(), len(text))
	}
	p.skip()
	return v, nil
}
