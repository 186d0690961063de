package client

import "github.com/convlog/convlog/projector"

// snapshotKeyFilters are the KV key filters that match every snapshot key of
// a thread (head and chunks), in the projector's layout.
func snapshotKeyFilters(tenant, thread string) []string {
	h := projector.HeadKey(tenant, thread)
	return []string{h, h + ".>"}
}
