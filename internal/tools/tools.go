//go:build tools

// Package tools pins modules convlog will use so go mod tidy keeps them.
package tools

import (
	_ "github.com/openai/openai-go"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/synadia-io/orbit.go/jetstreamext"
	_ "go.uber.org/goleak"
)
