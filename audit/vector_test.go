package audit_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/internal/nodetest"
)

var update = flag.Bool("update", false, "rewrite testdata/vector.json")

type vectorRecord struct {
	Subject  string              `json:"subject"`
	Seq      uint64              `json:"seq"`
	TimeNano int64               `json:"time_unix_nano,string"`
	Header   map[string][]string `json:"header"`
	Data     string              `json:"data_base64"`
	Leaf     string              `json:"leaf"`
}

type vector struct {
	Description string         `json:"description"`
	PublicKey   string         `json:"public_key"`
	Records     []vectorRecord `json:"records"`
	Checkpoint  struct {
		Body      string `json:"body_base64"`
		Signature string `json:"signature"`
	} `json:"checkpoint"`
}

// buildVector computes the vector from fixed inputs with this package.
func buildVector(t *testing.T) []byte {
	seed := sha256.Sum256([]byte("convlog audit test vector"))
	key := ed25519.NewKeyFromSeed(seed[:])
	at := time.Unix(1764144000, 123456789).UTC()
	recs := []audit.Record{
		{Subject: "conv.acme.t1", Seq: 1, Time: at, Data: []byte("\x81\xa2id\xa1a"),
			Header: map[string][]string{"Convlog-Type": {"thread.created"}, "Convlog-Schema": {"1"}, "Nats-Msg-Id": {"01a2-a"},
				"Nats-Expected-Last-Subject-Sequence": {"0"}}},
		{Subject: "conv.acme.t2", Seq: 2, Time: at.Add(time.Millisecond), Data: []byte("second"),
			Header: map[string][]string{"Convlog-Type": {"thread.created"}, "X-Extra": {"b", "a"}, "x-extra": {"c"}, "Nats-Sequence": {"2"}}},
		{Subject: "conv.acme.t1", Seq: 3, Time: at.Add(2 * time.Millisecond), Data: []byte("third \u00e9\u00e8"),
			Header: map[string][]string{"Convlog-Type": {"message.user"}, "Nats-Msg-Id": {"01a2-c"}}},
	}
	v := vector{Description: "docs/audit.md: leaves, chain heads and one signed checkpoint, from audit/vector_test.go; checked by docs/check_audit.mjs",
		PublicKey: audit.PublicKeyString(key.Public().(ed25519.PublicKey))}
	heads := map[string]audit.Hash{}
	cp := audit.Checkpoint{V: audit.CheckpointVersion, Stream: "CONVLOG", From: 1, Seq: 3, Time: at.Add(time.Second)}
	idx := map[string]int{}
	for _, r := range recs {
		l := audit.Leaf(r)
		v.Records = append(v.Records, vectorRecord{Subject: r.Subject, Seq: r.Seq, TimeNano: r.Time.UnixNano(), Header: r.Header,
			Data: base64.StdEncoding.EncodeToString(r.Data), Leaf: l.String()})
		i, ok := idx[r.Subject]
		if !ok {
			i = len(cp.Threads)
			idx[r.Subject] = i
			cp.Threads = append(cp.Threads, audit.ThreadHeads{Subject: r.Subject})
		}
		heads[r.Subject] = audit.Next(heads[r.Subject], l)
		cp.Threads[i].Head = heads[r.Subject].String()
		cp.Threads[i].Leaves = append(cp.Threads[i].Leaves, audit.LeafEntry{Seq: r.Seq, Leaf: l})
	}
	body, sig, _, err := audit.Sign(cp, key)
	require.NoError(t, err)
	// Open gives back what was signed, and refuses another key.
	opened, err := audit.Open(body, sig, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)})
	require.NoError(t, err)
	require.Equal(t, cp.Threads, opened.Threads)
	require.Equal(t, cp.Seq, opened.Seq)
	_, err = audit.Open(body, sig, []ed25519.PublicKey{make(ed25519.PublicKey, ed25519.PublicKeySize)})
	require.ErrorIs(t, err, audit.ErrBadSignature)
	v.Checkpoint.Body, v.Checkpoint.Signature = base64.StdEncoding.EncodeToString(body), sig
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

// The construction of docs/audit.md, pinned: the vector is what this
// package computes (a change without -update fails), and an independent
// implementation in JavaScript (docs/check_audit.mjs, Node's crypto only)
// recomputes every leaf and head from it and verifies the signature; a
// vector with one leaf changed fails there.
func TestTheConstructionIsReproducibleOutsideGo(t *testing.T) {
	got := buildVector(t)
	path := filepath.Join("testdata", "vector.json")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./audit -run TestTheConstruction -update")
	require.JSONEq(t, string(want), string(got), "the construction changed (run with -update after a deliberate change, and bump the domain strings' version)")

	node := nodetest.Node(t)
	script := filepath.Join("..", "docs", "check_audit.mjs")
	out, err := nodetest.Run(t, node, script, path)
	require.NoError(t, err, "%s", out)
	require.Equal(t, "ok\n", out)

	var v vector
	require.NoError(t, json.Unmarshal(want, &v))
	v.Records[1].Data = base64.StdEncoding.EncodeToString([]byte("altered"))
	out, err = nodetest.RunOn(t, node, script, v)
	require.Error(t, err, "an altered record must fail the JavaScript check: %s", out)
	require.Contains(t, out, "seq 2: leaf")
}
