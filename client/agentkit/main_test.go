package agentkit_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No test leaves a goroutine behind (servers, connections, watchers).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
