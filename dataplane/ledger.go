package dataplane

import (
	"sync"

	"github.com/cespare/xxhash/v2"
)

// sinkLedger remembers which source records (partition, offset) reached a
// sink, so a run can report records lost and duplicated by the pipeline
// instead of assuming exactly-once; and, for queries whose output keeps the
// input's per-key order, whether each key's records arrived in the order
// they were produced.
//
// Order is judged per (key, source partition) by the Kafka offset: the
// producer writes a key's records to one partition in production order, so
// a key's offsets there are its sequence numbers, stamped independently of
// the pipeline. A record whose offset is below the highest one seen for its
// key and partition arrived after a later record of the same key: reordered.
type sinkLedger struct {
	mu         sync.Mutex
	seen       map[int32][]uint64 // bitset of offsets per partition
	received   uint64
	distinct   uint64
	duplicates uint64
	// last is the highest offset seen per (key, partition), by a 64-bit
	// hash of both (a false match needs a collision among the job's keys);
	// nil when the query's output has no per-key order to check.
	last      map[uint64]int64
	reordered uint64
}

func newSinkLedger(order bool) *sinkLedger {
	l := &sinkLedger{seen: map[int32][]uint64{}}
	if order {
		l.last = map[uint64]int64{}
	}
	return l
}

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
		if l.last != nil {
			h := orderSlot(r.Key, r.Partition)
			if last, ok := l.last[h]; ok && r.Offset < last {
				l.reordered++
			} else {
				l.last[h] = r.Offset
			}
		}
	}
}

// orderSlot names a (key, partition) pair in sinkLedger.last.
func orderSlot(key []byte, partition int32) uint64 {
	return xxhash.Sum64(key) ^ (uint64(uint32(partition)) * 0x9e3779b97f4a7c15)
}

func (l *sinkLedger) counts() (received, distinct, duplicates uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.received, l.distinct, l.duplicates
}

// reorders reports the records that arrived after a later record of their
// key, and whether the ledger checks order at all.
func (l *sinkLedger) reorders() (n uint64, checked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reordered, l.last != nil
}

// restartOrder forgets the order seen so far: after a checkpoint restore
// the records after the cut are replayed, and the order check starts over
// from them rather than judging them against records it rolled back.
func (l *sinkLedger) restartOrder() {
	if l.last != nil {
		l.last = map[uint64]int64{}
	}
}
