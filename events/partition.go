package events

// Partition returns the partition, 0..k-1, of tenant/thread in a
// deployment of k partitions (k < 1 counts as 1): FNV-1a 32 of the bytes
// of tenant followed by those of thread, modulo k. It is what
// nats-server's subject mapping function {{partition(k,1,2)}} computes for
// "<prefix>.<tenant>.<thread>", so a producer in any language (or the
// server itself) places a thread the same way. The layout that uses it is
// docs/partitions-design.md.
func Partition(tenant, thread string, k int) int {
	if k <= 1 {
		return 0
	}
	// FNV-1a 32 (offset basis and prime of the FNV specification, as
	// hash/fnv.New32a), inline: every routed client call computes it, and
	// hash/fnv would allocate the hash and the byte slices.
	h := uint32(2166136261)
	for i := 0; i < len(tenant); i++ {
		h = (h ^ uint32(tenant[i])) * 16777619
	}
	for i := 0; i < len(thread); i++ {
		h = (h ^ uint32(thread[i])) * 16777619
	}
	return int(h % uint32(k))
}
