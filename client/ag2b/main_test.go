package ag2b_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No test leaves a goroutine behind (histories, watchers, listeners,
// servers).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
