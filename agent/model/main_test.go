package model_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No test leaves a goroutine behind (streams, servers, timers).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
