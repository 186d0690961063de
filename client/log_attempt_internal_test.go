package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// A read whose request the server never receives asks again after the
// attempt timeout, within the caller's deadline, and yields every message
// once: the first page's batched direct get (pages), the leader's last
// sequence a read through a consumer asks first (consumer), and the get
// by sequence that checks a duplicate append (at).
func TestReadRawAsksAgainWhatGoesUnanswered(t *testing.T) {
	for _, tc := range []struct {
		mode        string
		consumerMin int
		prefix      string
	}{
		{"pages", -1, "$JS.API.DIRECT.GET."},
		{"consumer", 0, "$JS.API.STREAM.MSG.GET."},
		{"at", -1, "$JS.API."},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			s := natstest.Run(t)
			nc, d := natstest.ConnectDropping(t, s.ClientURL(), tc.prefix, 0)
			c, subject, seqs := pagedLogOn(t, nc, provision.Config{})
			c.consumerMin = tc.consumerMin
			defer requireNoReadAhead(t)
			d.Left.Store(1)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if tc.mode == "at" {
				m, err := c.log.at(ctx, subject, seqs[3])
				require.NoError(t, err)
				require.EqualValues(t, 1, d.Dropped.Load(), "a request was dropped")
				require.Equal(t, seqs[3], m.Sequence)
				return
			}
			got, err := readAll(t, c, ctx, subject, 1, 0)
			require.NoError(t, err)
			require.EqualValues(t, 1, d.Dropped.Load(), "a request was dropped")
			require.Equal(t, seqs, got)
			requireNoConsumers(t, c)
		})
	}
}
