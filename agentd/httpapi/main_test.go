package httpapi_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the API, its streams and the test servers start has
// ended when the tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
