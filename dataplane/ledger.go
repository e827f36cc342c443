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
	last      *offsetTable
	reordered uint64
	// values is a collecting sink's table (nil for other sinks): observe
	// records each record's value there too, and checks a key's order in
	// the key's slot of it, falling back to last only for what a slot
	// cannot hold (long keys, records without a value, a key seen on a
	// second partition). Over 10 M keys each table costs a cache miss per
	// record; the counter's sink spent ~17 % of its workers' CPU in the two.
	values *keyValues
}

// newSinkLedger returns a sink's ledger; values is the collecting sink's
// table, or nil.
func newSinkLedger(order bool, values *keyValues) *sinkLedger {
	l := &sinkLedger{seen: map[int32][]uint64{}, values: values}
	if order {
		l.last = newOffsetTable()
	}
	return l
}

func (l *sinkLedger) observe(records []Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.values != nil {
		l.values.mu.Lock()
		defer l.values.mu.Unlock()
	}
	for i := range records {
		r := &records[i]
		l.received++
		var slot *shortSlot
		if l.values != nil {
			slot = l.values.observeLocked(r)
		}
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
		if l.last != nil && !l.inOrder(slot, r) {
			l.reordered++
		}
	}
}

// inOrder records r's offset as its key's highest on its partition and
// reports true, unless a higher one was seen: then it keeps that one and
// reports false. slot is r's key's collecting-sink slot, or nil.
func (l *sinkLedger) inOrder(slot *shortSlot, r *Record) bool {
	if slot != nil {
		if pos, ok := orderPos(r.Partition, r.Offset); ok {
			switch {
			case slot.pos == 0:
				slot.pos = pos
				return true
			case slot.pos>>posOffsetBits == pos>>posOffsetBits:
				if pos < slot.pos {
					return false
				}
				slot.pos = pos
				return true
			}
		}
	}
	return l.last.advance(orderSlot(r.Key, r.Partition), r.Offset)
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
		l.last = newOffsetTable()
		if l.values != nil {
			l.values.forgetOrder()
		}
	}
}

// offsetTable is sinkLedger.last: the highest offset per 64-bit slot hash,
// in one flat open-addressed array (linear probing, at most 3/4 full:
// fuller, the probes of a miss grow long; emptier, 10 M keys took twice
// the memory of a Go map).
// Every record of a sink looks its key up here, and a key set larger than
// the CPU caches made this the sink's main cost: a Go map's lookup touches
// its directory, a control word and then the slot, each a likely cache
// miss once the batch's other work has evicted them, where a probe here
// usually reads one cache line.
type offsetTable struct {
	slots []offsetSlot // length a power of two
	n     int
}

// offsetSlot is one entry; h == 0 marks a free slot, so hash 0 is stored
// as 1 (two slots then share an entry, as any two colliding hashes do).
type offsetSlot struct {
	h   uint64
	off int64
}

func newOffsetTable() *offsetTable { return &offsetTable{slots: make([]offsetSlot, 1024)} }

// advance records off for h and reports true, unless h already holds a
// higher offset: then it keeps that one and reports false (h's records
// arrived out of order).
func (t *offsetTable) advance(h uint64, off int64) bool {
	h = max(h, 1)
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		switch s.h {
		case h:
			if off < s.off {
				return false
			}
			s.off = off
			return true
		case 0:
			s.h, s.off = h, off
			if t.n++; 4*t.n > 3*len(t.slots) {
				t.grow()
			}
			return true
		}
	}
}

func (t *offsetTable) grow() {
	old := t.slots
	t.slots = make([]offsetSlot, 2*len(old))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.h == 0 {
			continue
		}
		i := s.h & mask
		for t.slots[i].h != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}
