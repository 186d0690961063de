package main

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/serve"
)

// httpLimitFlags are serve's limits of the HTTP server (httpapi.Config):
// stream memory budgets, request timeouts and the connection caps. Zero
// means the httpapi default.
type httpLimitFlags struct {
	StreamBufferBytes  int64
	StreamTotalBytes   int64
	ReadHeaderTimeout  time.Duration
	ReadTimeout        time.Duration
	ResponseTimeout    time.Duration
	IdleTimeout        time.Duration
	StreamWriteTimeout time.Duration
	MaxConns           int
	MaxConnsPerAddr    int
	ConnsPerAddrExempt prefixList
	MaxAudits          int
	CORSOrigins        []string
}

func (f *httpLimitFlags) register(fs *pflag.FlagSet) {
	fs.Int64Var(&f.StreamBufferBytes, "http-stream-buffer-bytes", httpapi.DefaultStreamBufferBytes, "bytes one SSE stream may hold in memory (log read ahead of its socket)")
	fs.Int64Var(&f.StreamTotalBytes, "http-stream-total-bytes", httpapi.DefaultStreamTotalBytes, "bytes all SSE streams and event pages may hold together")
	fs.DurationVar(&f.ReadHeaderTimeout, "http-read-header-timeout", httpapi.DefaultReadHeaderTimeout, "time to read a request's headers")
	fs.DurationVar(&f.ReadTimeout, "http-read-timeout", httpapi.DefaultReadTimeout, "time to read a whole request, body included (408 beyond)")
	fs.DurationVar(&f.ResponseTimeout, "http-response-timeout", httpapi.DefaultResponseTimeout, "time to answer a non-streaming request, from the end of its headers")
	fs.DurationVar(&f.IdleTimeout, "http-idle-timeout", httpapi.DefaultIdleTimeout, "time a keep-alive connection may wait for its next request")
	fs.DurationVar(&f.StreamWriteTimeout, "http-stream-write-timeout", httpapi.DefaultWriteTimeout, "time one write to a streaming client may take before the client is dropped")
	fs.StringSliceVar(&f.CORSOrigins, "http-cors-origin", nil, "a browser origin (scheme://host[:port]) allowed to call the API from another origin (CORS); repeat or comma-separate for several; none by default")
	fs.IntVar(&f.MaxAudits, "http-max-audits", httpapi.DefaultMaxAudits, "audit verifications (GET /v1/audit/verify, /v1/threads/{id}/audit) run at once; more are refused with 429")
	fs.IntVar(&f.MaxConns, "http-max-conns", 0, fmt.Sprintf("open HTTP connections at which a new one takes the slot of the longest idle keep-alive connection, or is refused with 503 when none is idle (0 = %d, lowered to leave a quarter of the file descriptor limit free)", httpapi.DefaultMaxConns))
	fs.IntVar(&f.MaxConnsPerAddr, "http-max-conns-per-addr", 0, fmt.Sprintf("open HTTP connections one client address (an IPv6 /64) may hold; more are refused with 503 (0 = a quarter of --http-max-conns, at least %d; -1 = no cap, for a reverse proxy that every client comes through)", httpapi.DefaultMinConnsPerAddr))
	fs.Var(&f.ConnsPerAddrExempt, "http-max-conns-per-addr-exempt", "a client address or CIDR prefix (e.g. a trusted reverse proxy's: 10.0.0.5 or 10.0.0.0/24) not held to --http-max-conns-per-addr; repeat or comma-separate for several")
}

// apply copies the flags into cfg.
func (f *httpLimitFlags) apply(cfg *httpapi.Config) {
	cfg.StreamBufferBytes, cfg.StreamTotalBytes = f.StreamBufferBytes, f.StreamTotalBytes
	cfg.ReadHeaderTimeout, cfg.ReadTimeout = f.ReadHeaderTimeout, f.ReadTimeout
	cfg.ResponseTimeout, cfg.IdleTimeout = f.ResponseTimeout, f.IdleTimeout
	cfg.WriteTimeout, cfg.MaxConns = f.StreamWriteTimeout, f.MaxConns
	cfg.MaxConnsPerAddr, cfg.MaxConnsPerAddrExempt = f.MaxConnsPerAddr, f.ConnsPerAddrExempt
	cfg.CORSOrigins, cfg.MaxAudits = f.CORSOrigins, f.MaxAudits
}

// validate reports every problem with the limits (for --check too).
func (f *httpLimitFlags) validate() error {
	var cfg httpapi.Config
	f.apply(&cfg)
	return serve.ValidateHTTPLimits(cfg)
}

// prefixList is a flag of client addresses and CIDR prefixes ("10.0.0.5",
// "10.0.0.0/24", "fd00::/8"), repeated or comma-separated; an address is
// its own /32 or /128.
type prefixList []netip.Prefix

func (p *prefixList) String() string {
	s := make([]string, len(*p))
	for i, x := range *p {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

// Set adds the comma-separated entries of v (a pflag.Value, as String and
// Type).
func (p *prefixList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if a, err := netip.ParseAddr(s); err == nil {
			*p = append(*p, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		x, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("%q is neither an IP address nor a CIDR prefix (e.g. 10.0.0.0/24)", s)
		}
		*p = append(*p, x.Masked())
	}
	return nil
}

func (p *prefixList) Type() string { return "addrs" }
