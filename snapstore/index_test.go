package snapstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/snapstore"
)

// TestMarshalSummaryIsTheReflectionEncoding checks that the hand-written
// summary encoder writes the bytes msgpack's reflection encoder writes for
// the struct, with every omitempty field empty and with each one set, and
// that they decode back to the summary.
func TestMarshalSummaryIsTheReflectionEncoding(t *testing.T) {
	at := time.Date(2026, 11, 28, 17, 0, 0, 123456789, time.UTC)
	full := snapstore.Summary{Tenant: "acme", Thread: "t1", Owner: "ann", Agent: "helper", Title: "a title",
		Metadata: map[string]string{"k": "v"}, CreatedAt: at, UpdatedAt: at.Add(time.Hour), Version: 1 << 40,
		Messages: 70000, Pending: 2, Rejected: 3, Deleted: true, ForkedFrom: &fold.ForkRef{}, ExternalID: "ext-1"}
	cases := map[string]snapstore.Summary{
		"only the required fields": {Tenant: "acme", Thread: "t1", CreatedAt: at, UpdatedAt: at, Version: 7, Messages: 1},
		"zero":                     {},
		"every field":              full,
		"an empty metadata map":    {Tenant: "acme", Thread: "t1", Metadata: map[string]string{}, Version: 200},
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := msgpack.Marshal(&s)
			require.NoError(t, err)
			got, err := snapstore.MarshalSummary(s)
			require.NoError(t, err)
			require.Equal(t, want, got)
			back, err := snapstore.UnmarshalSummary(got)
			require.NoError(t, err)
			if len(s.Metadata) == 0 {
				s.Metadata = nil
			}
			s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
			require.Equal(t, s, back)
		})
	}
}
