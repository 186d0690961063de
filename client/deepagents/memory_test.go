package deepagents_test

import (
	"testing"

	"github.com/convlog/convlog/client/deepagents"
	"github.com/convlog/convlog/client/deepagents/checkpointertest"
)

func TestInMemoryCheckpointerConformance(t *testing.T) {
	checkpointertest.Run(t, func(*testing.T) deepagents.Checkpointer { return deepagents.NewInMemoryCheckpointer() })
}
