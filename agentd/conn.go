package main

import (
	"os"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/convlog/convlog/agentd/internal/natsconn"
)

// connFlags are the NATS connection settings every subcommand shares
// (registerConnFlags binds them): either --nats-url (an existing server or
// cluster) or the embedded JetStream in --data-dir.
type connFlags = natsconn.Config

// conn is an open NATS connection, with the embedded server if this
// process runs one.
type conn = natsconn.Conn

// registerConnFlags binds f to the NATS flags in fs.
func registerConnFlags(f *connFlags, fs *pflag.FlagSet) {
	fs.StringVar(&f.DataDir, "data-dir", envOr("CONVLOG_DATA_DIR", "./convlog-data"), "JetStream data directory of the embedded NATS server (env CONVLOG_DATA_DIR); ignored with --nats-url")
	fs.StringVar(&f.NATSURL, "nats-url", os.Getenv("CONVLOG_NATS_URL"), "comma-separated NATS URLs of an existing server or cluster (env CONVLOG_NATS_URL); empty = embedded")
	fs.StringVar(&f.CredsFile, "creds", "", "NATS credentials file (JWT + NKey seed)")
	fs.StringVar(&f.NKeyFile, "nkey", "", "NATS NKey seed file")
	fs.StringVar(&f.User, "user", "", "NATS user name (password from --password-file or env CONVLOG_NATS_PASSWORD)")
	fs.StringVar(&f.PasswordFile, "password-file", "", "file holding the NATS password")
	fs.StringVar(&f.TokenFile, "token-file", "", "file holding a NATS token (or env CONVLOG_NATS_TOKEN)")
	fs.StringVar(&f.TLSCert, "tls-cert", "", "client TLS certificate file")
	fs.StringVar(&f.TLSKey, "tls-key", "", "client TLS key file")
	fs.StringVar(&f.TLSCA, "tls-ca", "", "CA file to verify the NATS server")
	fs.IntVar(&f.Replicas, "replicas", 1, "replicas of the stream and KV buckets (1 or 3 on a cluster); with --nats-url, commands other than serve provision only when it is given")
	fs.IntVar(&f.Partitions, "partitions", envInt("CONVLOG_PARTITIONS"), "partitions of the log and snapshot buckets (K; env CONVLOG_PARTITIONS): recorded by the first process that provisions a deployment and fixed after; 0 = the deployment's (1 for a new one); see docs/partitions-design.md")
	fs.StringVar(&f.Stream, "stream", "CONVLOG", "JetStream stream name")
	fs.StringVar(&f.Prefix, "subject-prefix", "conv", "thread subject prefix")
	fs.Int32Var(&f.MaxPayload, "max-payload", 0, "embedded server max payload in bytes (0 = NATS default, 1 MiB)")
	fs.StringVar(&f.Listen, "nats-listen", "127.0.0.1:-1", "client address of the embedded NATS server (host:port; -1 = random port); a non-loopback address needs --nats-tls-cert/--nats-tls-key or --insecure-nats-listen")
	fs.StringVar(&f.NATSTLSCert, "nats-tls-cert", "", "certificate file: the embedded NATS server's client listener requires TLS")
	fs.StringVar(&f.NATSTLSKey, "nats-tls-key", "", "key file of --nats-tls-cert")
	fs.BoolVar(&f.InsecureListen, "insecure-nats-listen", false, "allow a non-loopback --nats-listen without TLS (credentials still required)")
}

// envInt is the integer in env k: 0 when unset, -1 when not an integer
// (validate then names the flag).
func envInt(k string) int {
	v := os.Getenv(k)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
