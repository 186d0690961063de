package events

import "hash/fnv"

// Partition returns the partition, 0..k-1, of tenant/thread in a
// deployment of k partitions (k < 1 counts as 1): FNV-1a 32 of the bytes
// of tenant followed by those of thread, modulo k. It is what
// nats-server's subject mapping function {{partition(k,1,2)}} computes for
// "<prefix>.<tenant>.<thread>", so a producer in any language (or the
// server itself) places a thread the same way. The layout that uses it is
// docs/partitions-design.md (issue 21, item 4).
func Partition(tenant, thread string, k int) int {
	if k <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenant))
	_, _ = h.Write([]byte(thread))
	return int(h.Sum32() % uint32(k))
}
