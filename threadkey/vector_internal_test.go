package threadkey

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/nodetest"
)

var update = flag.Bool("update", false, "rewrite the vectors in testdata")

// vector is a sealed event and a sealed value with everything needed to
// open them: the construction of the package doc and schemas/README.md,
// pinned for readers in other languages (docs/check_sealed.mjs).
type vector struct {
	Description string `json:"description"`
	KeyRecord   string `json:"key_record"` // hex, as stored in convlog_keys
	Event       struct {
		Clear  string `json:"clear"`  // hex, the event as events.Marshal writes it
		Sealed string `json:"sealed"` // hex, as stored
	} `json:"event"`
	Value struct {
		Tenant string `json:"tenant"`
		Thread string `json:"thread"`
		Place  string `json:"place"`
		Plain  string `json:"plain"`  // hex
		Sealed string `json:"sealed"` // hex
	} `json:"value"`
}

// counter is a deterministic stand-in for crypto/rand.
type counter byte

func (c *counter) Read(b []byte) (int, error) {
	for i := range b {
		*c++
		b[i] = byte(*c)
	}
	return len(b), nil
}

// vectors are the pinned vectors, one per event format: the file and the
// sealer that writes its event.
var vectors = []struct {
	file, description string
	seal              func(*threadKey, []byte, events.PayloadMember) ([]byte, error)
}{
	{"vector.json", "threadkey's construction: a thread key record, an event sealed with it and a KV value sealed with it (hex). Check with: node docs/check_sealed.mjs threadkey/testdata/vector.json", sealEventV1},
	{"vector_v2.json", "threadkey's construction: a thread key record, an event sealed with it in format 2 (XChaCha20-Poly1305) and a KV value sealed with it (hex). Check with: node docs/check_sealed.mjs threadkey/testdata/vector_v2.json", sealEvent},
}

func buildVector(t *testing.T, description string, seal func(*threadKey, []byte, events.PayloadMember) ([]byte, error)) []byte {
	t.Helper()
	var c counter
	saved := randRead
	randRead = c.Read
	defer func() { randRead = saved }()

	var rec [recordLen]byte
	rec[0] = recordVersion
	_, _ = c.Read(rec[1:])
	tk, err := parseRecord(rec[:], 1)
	require.NoError(t, err)
	ev := events.Event{ID: "01972b6e-8a40-7c1d-8e2f-3a4b5c6d7e01", Type: events.TypeUserMessage, Tenant: "acme", Thread: "support-4711",
		Time: time.Date(2025, 6, 1, 12, 0, 1, 0, time.UTC), Producer: "chat-frontend", SchemaVersion: 1,
		Payload: events.UserMessage{Content: events.Text("my order 4711 never arrived")}}
	clear, err := events.Marshal(ev)
	require.NoError(t, err)
	pm, err := events.LocatePayload(clear)
	require.NoError(t, err)
	sealed, err := seal(tk, clear, pm)
	require.NoError(t, err)
	opened, err := events.LocatePayload(sealed)
	require.NoError(t, err)
	back, err := openEvent(tk, sealed, opened)
	require.NoError(t, err)
	require.Equal(t, clear, back)

	var v vector
	v.Description = description
	v.KeyRecord = hex.EncodeToString(rec[:])
	v.Event.Clear, v.Event.Sealed = hex.EncodeToString(clear), hex.EncodeToString(sealed)
	v.Value.Tenant, v.Value.Thread, v.Value.Place = "acme", "support-4711", "acme.support-4711"
	plain := []byte("a snapshot head")
	sv, err := sealValue(tk, v.Value.Place, plain)
	require.NoError(t, err)
	pv, err := openValue(tk, v.Value.Place, sv)
	require.NoError(t, err)
	require.Equal(t, plain, pv)
	v.Value.Plain, v.Value.Sealed = hex.EncodeToString(plain), hex.EncodeToString(sv)
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

// The sealing construction is pinned by a vector per event format, and a
// reader in another language (Node's crypto, nothing else) opens both as
// schemas/README.md describes; an altered ciphertext fails there too.
// New events are sealed in format 2; format 1 stays readable.
func TestTheSealingIsReproducibleOutsideGo(t *testing.T) {
	node := nodetest.Node(t)
	script := filepath.Join("..", "docs", "check_sealed.mjs")
	for _, vec := range vectors {
		t.Run(vec.file, func(t *testing.T) {
			got := buildVector(t, vec.description, vec.seal)
			path := filepath.Join("testdata", vec.file)
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./threadkey -run TestTheSealing -update")
			require.JSONEq(t, string(want), string(got), "the construction changed (run with -update after a deliberate change, and bump the format and labels)")

			out, err := nodetest.Run(t, node, script, path)
			require.NoError(t, err, "%s", out)
			require.Equal(t, "ok\n", out)

			var v vector
			require.NoError(t, json.Unmarshal(want, &v))
			b, err := hex.DecodeString(v.Event.Sealed)
			require.NoError(t, err)
			b[len(b)-1] ^= 1
			v.Event.Sealed = hex.EncodeToString(b)
			out, err = nodetest.RunOn(t, node, script, v)
			require.Error(t, err, "an altered ciphertext must fail the JavaScript check: %s", out)
		})
	}
}
