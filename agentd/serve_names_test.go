package main

import (
	"fmt"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/internal/natsconn"
	"github.com/convlog/convlog/agentd/serve"
)

// The tests of this package name serve's parts as they were named when
// they lived here; these give them those names.

// tenantUsersFile is natsconn.TenantUsersFile.
const tenantUsersFile = natsconn.TenantUsersFile

// testMetrics is serve's metrics as the tests use them.
type testMetrics struct{ m *serve.Metrics }

func newMetrics(reg prometheus.Registerer) testMetrics { return testMetrics{serve.NewMetrics(reg)} }

func (t testMetrics) httpHooks() httpapi.Hooks { return t.m.HTTPHooks() }

// newHTTPServer builds the HTTP server serve.Run builds for handler h: a
// listener on addr that caps connections and the API's timeouts.
func newHTTPServer(api *httpapi.Server, h http.Handler, addr string) (*http.Server, net.Listener, error) {
	ln, err := api.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("http: %w", err)
	}
	return api.HTTPServer(h), ln, nil
}
