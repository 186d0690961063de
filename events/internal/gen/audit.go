package gen

import (
	"bytes"
	"fmt"
	"go/format"

	"github.com/convlog/convlog/events"
)

// auditTypes are the type names package audit needs, which it holds as
// constants of its own: the dependency direction keeps events out of its
// imports.
var auditTypes = []struct {
	name, doc string
	typ       events.Type
}{
	{"RedactedType", "the Convlog-Type header value of a redaction record", events.TypeRedacted},
	{"ErasedType", "the Convlog-Type header value of an erasure marker", events.TypeErased},
}

// auditGo returns audit/eventtypes_gen.go.
func auditGo(src source) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(goHeader)
	b.WriteString("package audit\n\n// Event type names, copied from package events, which audit does not import.\nconst (\n")
	for _, c := range auditTypes {
		if _, ok := events.Lookup(c.typ); !ok {
			return nil, fmt.Errorf("audit's %s names %q, which is not registered", c.name, c.typ)
		}
		fmt.Fprintf(&b, "\t// %s is %s (events.%s).\n\t%s = %q\n", c.name, c.doc, src.constOf[c.typ], c.name, c.typ)
	}
	b.WriteString(")\n")
	return format.Source(b.Bytes())
}
