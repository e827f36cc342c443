package statesvc

// SegmentHead names one (bucket, owner) part of a table and how many
// entries it holds: what a migrator chooses its next pull from.
type SegmentHead struct {
	Bucket  int
	Owner   string
	Entries int
}

// Heads lists the (bucket, owner) pairs that still have entries, by bucket,
// then by owner index (Next's order). A bucket with one owner and no
// buffered additions (the usual case) is answered from its header; only
// buckets with several owners are walked.
func (k *KLT) Heads() []SegmentHead {
	k.mu.RLock()
	defer k.mu.RUnlock()
	var out []SegmentHead
	for bi, b := range k.buckets {
		if b == nil || b.live() == 0 {
			continue
		}
		if len(b.owners) == 1 && len(b.extra) == 0 {
			out = append(out, SegmentHead{Bucket: bi, Owner: k.owners[b.owners[0]], Entries: b.live()})
			continue
		}
		counts := map[uint32]int{}
		b.entries(func(_, o uint32) { counts[o]++ })
		for o := range k.owners {
			if n := counts[uint32(o)]; n > 0 {
				out = append(out, SegmentHead{Bucket: bi, Owner: k.owners[o], Entries: n})
			}
		}
	}
	return out
}
