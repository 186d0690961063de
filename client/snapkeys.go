package client

// snapshotKeyFilters are the KV key filters that match every snapshot key of
// a thread (head and chunks), in the projector's layout.
func snapshotKeyFilters(tenant, thread string) []string {
	return []string{"*." + tenant + "." + thread, "*." + tenant + "." + thread + ".>"}
}
