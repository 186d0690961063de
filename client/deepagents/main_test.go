package deepagents_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No test leaves a goroutine behind (servers, connections).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
