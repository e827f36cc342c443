package dataplane

import "sync"

// sinkLedger remembers which source records (partition, offset) reached a
// sink, so a run can report records lost and duplicated by the pipeline
// instead of assuming exactly-once.
type sinkLedger struct {
	mu         sync.Mutex
	seen       map[int32][]uint64 // bitset of offsets per partition
	received   uint64
	distinct   uint64
	duplicates uint64
}

func newSinkLedger() *sinkLedger { return &sinkLedger{seen: map[int32][]uint64{}} }

func (l *sinkLedger) observe(records []Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range records {
		r := &records[i]
		l.received++
		if r.Offset < 0 {
			continue
		}
		bits := l.seen[r.Partition]
		word := int(r.Offset >> 6)
		if word >= len(bits) {
			grown := make([]uint64, max(word+1, 2*len(bits)))
			copy(grown, bits)
			bits = grown
			l.seen[r.Partition] = bits
		}
		mask := uint64(1) << (uint64(r.Offset) & 63)
		if bits[word]&mask != 0 {
			l.duplicates++
			continue
		}
		bits[word] |= mask
		l.distinct++
	}
}

func (l *sinkLedger) counts() (received, distinct, duplicates uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.received, l.distinct, l.duplicates
}
