package convlog_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/schemas"
)

// Adding an event type is one registry entry (events/registry.go), its
// payload type, its fold case, its payload schema and its place in the
// HTTP API's Event schema. This test fails when any of those is missing
// for a registered type, or lists a type the registry does not have.
// (schemas' own tests check the envelope enum and the golden vectors.)
func TestEveryRegisteredTypeIsEverywhere(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				Event struct {
					Properties struct {
						Type struct {
							Enum []events.Type `json:"enum"`
						} `json:"type"`
					} `json:"properties"`
				} `json:"Event"`
			} `json:"schemas"`
		} `json:"components"`
	}
	b, err := os.ReadFile("agentd/httpapi/openapi.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	apiEnum := doc.Components.Schemas.Event.Properties.Type.Enum
	require.NotEmpty(t, apiEnum, "openapi.json has components.schemas.Event.properties.type.enum")

	at := time.Unix(1700000000, 0).UTC()
	for _, ti := range events.Registry() {
		t.Run(string(ti.Type), func(t *testing.T) {
			_, err := fs.Stat(schemas.FS, "payloads/"+string(ti.Type)+".json")
			require.NoError(t, err, "schemas/payloads/%s.json", ti.Type)
			require.Equal(t, ti.InAPI, slices.Contains(apiEnum, ti.Type), "openapi.json's Event type enum and the registry's InAPI disagree")

			s := fold.NewState("acme", "t")
			created := events.New("acme", "t", "test", events.ThreadCreated{})
			require.NoError(t, fold.Apply(s, events.Stored{Event: created, Seq: 1, StoredAt: at}))
			p := ti.Zero()
			ev := events.New("acme", "t", "test", p)
			err = fold.ApplyValidated(s, events.Stored{Event: ev, Seq: 2, StoredAt: at})
			var rej *fold.RejectionError
			if errors.As(err, &rej) {
				require.NotEqual(t, fold.CodeUnknownType, rej.Code, "the fold has no case for %s: %s", ti.Type, rej.Reason)
			}
		})
	}
	for _, typ := range apiEnum {
		_, ok := events.Lookup(typ)
		require.True(t, ok, "openapi.json lists %s, which is not registered", typ)
	}
}
