// Command eventsgen writes the files that follow from the event-type
// registry (see package gen). It runs from "go generate ./events/", in the
// events directory, and builds events without its generated decoder
// (tag convlog_nogen) so that a stale decode_gen.go never stops it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/convlog/convlog/events/internal/gen"
)

func main() {
	root := flag.String("root", "..", "the repository root")
	flag.Parse()
	files, err := gen.Files(*root)
	if err == nil {
		err = gen.Write(*root, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "eventsgen:", err)
		os.Exit(1)
	}
}
