package main

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/serve"
)

// agentd serve without flags or environment runs serve.DefaultConfig.
func TestServeFlagDefaultsAreServeDefaultConfig(t *testing.T) {
	for _, k := range []string{"CONVLOG_DATA_DIR", "CONVLOG_NATS_URL", "CONVLOG_HTTP_ADDR", "CONVLOG_PARTITIONS", "CONVLOG_AUDIT_KEY",
		"CONVLOG_HTTP_TLS_CERT", "CONVLOG_HTTP_TLS_KEY", "CONVLOG_QUOTA_FILE"} {
		t.Setenv(k, "")
	}
	var f serveFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(fs)
	require.NoError(t, fs.Parse(nil))
	require.Equal(t, serve.DefaultConfig(), f.config(nil, nil))
}
