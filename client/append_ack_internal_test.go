package client

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// pubAckByJSON is parsePubAck done by encoding/json alone, as jetstream's
// publish reads an ack.
func pubAckByJSON(data []byte) (uint64, bool, error) {
	var ack struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return 0, false, jetstream.ErrInvalidJSAck
	}
	if ack.Error != nil {
		return 0, false, ack.Error
	}
	if ack.PubAck == nil || ack.Stream == "" {
		return 0, false, jetstream.ErrInvalidJSAck
	}
	return ack.Sequence, ack.Duplicate, nil
}

// requireSameAck checks that parsePubAck answers data as encoding/json
// does: the same sequence and duplicate flag, or the same error.
func requireSameAck(t *testing.T, data []byte) {
	t.Helper()
	seq, dup, err := parsePubAck(data)
	wseq, wdup, werr := pubAckByJSON(data)
	if werr != nil {
		require.Error(t, err, "%q", data)
		var want, got *jetstream.APIError
		if errors.As(werr, &want) {
			require.ErrorAs(t, err, &got, "%q", data)
			require.Equal(t, *want, *got, "%q", data)
		} else {
			require.ErrorIs(t, err, jetstream.ErrInvalidJSAck, "%q", data)
		}
		return
	}
	require.NoError(t, err, "%q", data)
	require.Equal(t, wseq, seq, "%q", data)
	require.Equal(t, wdup, dup, "%q", data)
}

var ackSamples = []string{
	`{"stream":"CONVLOG","seq":42}`,
	`{"stream":"CONVLOG","seq":42,"duplicate":true}`,
	`{"stream":"CONVLOG","domain":"hub","seq":18446744073709551615}`,
	`{"stream":"CONVLOG","seq":7,"duplicate":false,"val":"x"}`,
	`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 41"},"stream":"CONVLOG","seq":0}`,
	`{"error":{"code":503,"err_code":10167,"description":"too many requests"}}`,
	`{"stream":"","seq":1}`,
	`{"seq":1}`,
	`{"stream":"C","seq":01}`,
	`{"stream":"C","seq":1e3}`,
	`{"Stream":"C","SEQ":3}`,
	`{"stream":"C\u0041","seq":3}`,
	`{"stream":"C","seq":"3"}`,
	`{"stream":"C","seq":3,"duplicate":"true"}`,
	`{"stream":"C","seq":3} `,
	`{"stream":"C","seq":18446744073709551616}`,
	`not json`,
	``,
}

func TestPubAcksReadAsEncodingJSONReadsThem(t *testing.T) {
	for _, s := range ackSamples {
		requireSameAck(t, []byte(s))
	}
}

func TestTheCommonAckIsReadWithoutAllocating(t *testing.T) {
	data := []byte(`{"stream":"CONVLOG","seq":42,"duplicate":true}`)
	allocs := testing.AllocsPerRun(100, func() {
		seq, dup, err := parsePubAck(data)
		if err != nil || seq != 42 || !dup {
			t.Fatal(seq, dup, err)
		}
	})
	require.Zero(t, allocs)
}

func FuzzParsePubAck(f *testing.F) {
	for _, s := range ackSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { requireSameAck(t, data) })
}
