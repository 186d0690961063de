package gen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/convlog/convlog/events"
)

// source is what the generator reads from events' Go files (not the
// generated ones, so that a stale generated file never stands in the
// way): the names of the Type constants and the payload types with a
// canonicalize method.
type source struct {
	// constOf maps a type's wire name to the Go constant that holds it.
	constOf map[events.Type]string
	// canonical holds the names of the types T whose *T has a
	// canonicalize method.
	canonical map[string]bool
}

func parseEvents(dir string) (source, error) {
	src := source{constOf: map[events.Type]string{}, canonical: map[string]bool{}}
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return src, err
	}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, "_gen.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return src, err
		}
		f, err := parser.ParseFile(fset, name, b, parser.SkipObjectResolution)
		if err != nil {
			return src, err
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				if d.Tok == token.CONST {
					typeConsts(d, src.constOf)
				}
			case *ast.FuncDecl:
				if d.Name.Name != "canonicalize" || d.Recv == nil || len(d.Recv.List) != 1 {
					continue
				}
				if star, ok := d.Recv.List[0].Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok {
						src.canonical[id.Name] = true
					}
				}
			}
		}
	}
	for _, ti := range events.Registry() {
		if src.constOf[ti.Type] == "" {
			return src, fmt.Errorf("events declares no constant of type Type with the value %q", ti.Type)
		}
	}
	return src, nil
}

// typeConsts adds the constants of type Type in d, with a string literal
// value, to m.
func typeConsts(d *ast.GenDecl, m map[events.Type]string) {
	for _, s := range d.Specs {
		vs := s.(*ast.ValueSpec)
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Type" || len(vs.Names) != len(vs.Values) {
			continue
		}
		for i, v := range vs.Values {
			lit, ok := v.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			if s, err := strconv.Unquote(lit.Value); err == nil {
				m[events.Type(s)] = vs.Names[i].Name
			}
		}
	}
}
