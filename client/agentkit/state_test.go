package agentkit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/client/agentkit"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/clienttest"
)

type files map[string]string

// The seed's kv API (set, get, delete, has) on a thread, persisted as
// events and read back from the projection.
func TestStateKeyValueStore(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	h := agentkit.NewHistory(c, agentkit.Config{})
	ref, err := h.CreateThread(ctx, agentkit.CreateThreadRequest{})
	require.NoError(t, err)
	kv := h.State(ref.ThreadID)

	steps := []struct {
		name string
		do   func(t *testing.T)
	}{
		{"a key that was never set is absent", func(t *testing.T) {
			v, ok, err := kv.Get(ctx, "user-name")
			require.NoError(t, err)
			require.False(t, ok)
			require.Nil(t, v)
			has, err := kv.Has(ctx, "user-name")
			require.NoError(t, err)
			require.False(t, has)
		}},
		{"a set value reads back as JSON", func(t *testing.T) {
			_, err := kv.Set(ctx, "user-name", "Alice")
			require.NoError(t, err)
			v, ok, err := kv.Get(ctx, "user-name")
			require.NoError(t, err)
			require.True(t, ok)
			require.JSONEq(t, `"Alice"`, string(v))
		}},
		{"a structured value decodes into its Go type", func(t *testing.T) {
			_, err := kv.Set(ctx, "files", files{"main.go": "package main"})
			require.NoError(t, err)
			got, ok, err := agentkit.GetAs[files](ctx, kv, "files")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, files{"main.go": "package main"}, got)
		}},
		{"a value that does not fit the type is a decode error", func(t *testing.T) {
			_, _, err := agentkit.GetAs[int](ctx, kv, "files")
			require.Error(t, err)
		}},
		{"an absent key decodes to the zero value", func(t *testing.T) {
			got, ok, err := agentkit.GetAs[files](ctx, kv, "nothing")
			require.NoError(t, err)
			require.False(t, ok)
			require.Nil(t, got)
		}},
		{"all returns every key", func(t *testing.T) {
			all, err := kv.All(ctx)
			require.NoError(t, err)
			require.Len(t, all, 2)
			require.JSONEq(t, `"Alice"`, string(all["user-name"]))
		}},
		{"a deleted key is absent", func(t *testing.T) {
			_, err := kv.Delete(ctx, "user-name")
			require.NoError(t, err)
			has, err := kv.Has(ctx, "user-name")
			require.NoError(t, err)
			require.False(t, has)
		}},
		{"deleting an absent key is not an error", func(t *testing.T) {
			_, err := kv.Delete(ctx, "user-name")
			require.NoError(t, err)
		}},
		{"every write is an event of the log", func(t *testing.T) {
			var types []events.Type
			for st, err := range c.Events(ctx, ref.Tenant, ref.ThreadID, 0, 0) {
				require.NoError(t, err)
				types = append(types, st.Type)
			}
			require.Equal(t, []events.Type{events.TypeThreadCreated, events.TypeStateSet, events.TypeStateSet,
				events.TypeStateDeleted, events.TypeStateDeleted}, types)
		}},
	}
	for _, s := range steps {
		t.Run(s.name, s.do)
	}
}

// Unlike AgentKit's kv, the state outlives the run and is shared: another
// service's client, on another connection, reads what this one set.
func TestStateIsSharedAcrossClients(t *testing.T) {
	e := clienttest.New(t)
	ctx := context.Background()
	c1, c2 := e.Client, e.Another(t, client.Config{})

	ref, err := agentkit.NewHistory(c1, agentkit.Config{}).CreateThread(ctx, agentkit.CreateThreadRequest{ThreadID: "shared"})
	require.NoError(t, err)
	_, err = agentkit.NewState(c1, "", ref.ThreadID).Set(ctx, "plan", []string{"read", "write"})
	require.NoError(t, err)
	got, ok, err := agentkit.GetAs[[]string](ctx, agentkit.NewState(c2, events.DefaultTenant, "shared"), "plan")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []string{"read", "write"}, got)
}

func TestStateErrors(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	missing := agentkit.NewState(c, "", "missing")
	_, _, err := missing.Get(ctx, "k")
	require.ErrorIs(t, err, client.ErrThreadNotFound, "reading the state of a missing thread")
	_, err = missing.Set(ctx, "k", 1)
	require.ErrorIs(t, err, fold.ErrRejected, "writing the state of a missing thread")

	ref, err := agentkit.NewHistory(c, agentkit.Config{}).CreateThread(ctx, agentkit.CreateThreadRequest{})
	require.NoError(t, err)
	kv := agentkit.NewState(c, "", ref.ThreadID)
	_, err = kv.Set(ctx, "f", func() {})
	require.Error(t, err, "a value encoding/json cannot marshal")
	_, err = kv.Set(ctx, "", 1)
	require.Error(t, err, "an empty key")
	_, err = kv.Set(ctx, "big", strings.Repeat("x", fold.MaxStateBytes))
	var rej *fold.RejectionError
	require.ErrorAs(t, err, &rej, "a value over the thread's state limit")
	require.Equal(t, fold.CodeTooLarge, rej.Code)
}
