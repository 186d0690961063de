package webui_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the tests start (the stack, the test servers, chromedp's
// browser handling) has ended when the tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
