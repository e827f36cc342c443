package statesvc

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// KLT is the key lookup table of lazy (Koala) migration, kept per task: for
// each user key whose bucket moved to this task but whose value is not yet
// migrated, the owner task that physically holds the value. Keys are full
// user key bytes, independent of state names (one entry covers every state
// of the key). Safe for concurrent use (the task's batch path and a
// background migrator).
//
// Memory: per key, the key bytes plus 4 bytes of arena entry overhead (for
// keys under 64 bytes and fewer than 128 owners) and 9-15 bytes of hash index
// depending on where the index is in its growth cycle (measured: 13.7 bytes
// beyond an 8-byte key at 1M keys, BenchmarkKLTMemory); owner names are
// interned once in a small table.
//
// Lookups: LookupBatch resolves a batch in passes that overlap the cache
// misses of different keys; prefer it to per-key Lookup on the batch path.
type KLT struct {
	mu       sync.RWMutex
	t        kltTable
	owners   []string
	ownerIdx map[string]uint32
}

// Entry is one key lookup table entry.
type Entry struct {
	Bucket int
	Key    []byte
	Owner  string
}

// NewKLT returns an empty key lookup table.
func NewKLT() *KLT { return &KLT{ownerIdx: make(map[string]uint32)} }

func (k *KLT) internOwner(owner string) uint32 {
	if i, ok := k.ownerIdx[owner]; ok {
		return i
	}
	i := uint32(len(k.owners))
	k.owners = append(k.owners, owner)
	k.ownerIdx[owner] = i
	return i
}

// Add records that key (of bucket) is held by owner, replacing any earlier
// entry for key. It panics on an empty owner or a bucket outside
// [0, MaxBuckets) (programming errors).
func (k *KLT) Add(bucket int, key []byte, owner string) {
	if owner == "" {
		panic("statesvc: KLT.Add with empty owner")
	}
	mustBucket(bucket)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.t.put(key, bucket, k.internOwner(owner))
}

// Lookup returns the task holding key's value, if the key is not yet local.
func (k *KLT) Lookup(key []byte) (owner string, ok bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.lookupLocked(key)
}

func (k *KLT) lookupLocked(key []byte) (string, bool) {
	i := k.t.find(key, kltHash(key))
	if i < 0 {
		return "", false
	}
	_, _, o, _, _ := k.t.entryAt(k.t.slots[i] & kltLocMask)
	return k.owners[o], true
}

// LookupBatch looks up every key under one lock acquisition and appends the
// owners to dst, aligned with keys; "" marks a key that is local (not in the
// table). This is the per-batch path of a stateful operator.
func (k *KLT) LookupBatch(keys [][]byte, dst []string) []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.t.live == 0 {
		for range keys {
			dst = append(dst, "")
		}
		return dst
	}
	var idx [kltGroup]int
	var sink uint64
	for base := 0; base < len(keys); base += kltGroup {
		g := keys[base:min(base+kltGroup, len(keys))]
		sink += k.t.findBatch(g, idx[:len(g)])
		for _, i := range idx[:len(g)] {
			o := ""
			if i >= 0 {
				_, _, oi, _, _ := k.t.entryAt(k.t.slots[i] & kltLocMask)
				o = k.owners[oi]
			}
			dst = append(dst, o)
		}
	}
	kltSink.Store(sink)
	return dst
}

// kltSink receives findBatch's touch sums so the compiler keeps the loads.
var kltSink atomic.Uint64

// Remove drops key (it is now local). Removing an absent key is a no-op.
func (k *KLT) Remove(key []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if i := k.t.find(key, kltHash(key)); i >= 0 {
		k.t.removeAt(i)
		k.shrinkLocked()
	}
}

// RemoveKeys drops several keys under one lock acquisition.
func (k *KLT) RemoveKeys(keys [][]byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range keys {
		if i := k.t.find(key, kltHash(key)); i >= 0 {
			k.t.removeAt(i)
		}
	}
	k.shrinkLocked()
}

func (k *KLT) shrinkLocked() {
	k.t.maybeShrink()
	if k.t.live == 0 && len(k.owners) > 0 {
		k.owners, k.ownerIdx = nil, make(map[string]uint32)
	}
}

// Len returns the number of keys in the table.
func (k *KLT) Len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.t.live
}

// Bytes returns the approximate memory footprint in bytes (KLT-size metric).
func (k *KLT) Bytes() uint64 {
	k.mu.RLock()
	defer k.mu.RUnlock()
	n := k.t.bytes() + 128
	for _, o := range k.owners {
		n += uint64(len(o)) + 16 + 16 + 8 // name, slice entry, map entry
	}
	return n
}

// Take returns up to n entries for progressive migration without removing
// them (call Remove once a key is local). The order is the insertion order,
// so it is deterministic for a given history of calls; consecutive Takes
// with the returned keys removed in between walk the table front to back.
// The entries' keys are copies the caller owns.
func (k *KLT) Take(n int) []Entry {
	if n <= 0 {
		return nil
	}
	k.mu.Lock() // Take advances the scan hint
	defer k.mu.Unlock()
	var out []Entry
	first := true
	k.t.walk(k.t.takeHint, func(loc uint64, key []byte, bucket int, owner uint32) bool {
		if first {
			k.t.takeHint, first = loc, false
		}
		out = append(out, Entry{Bucket: bucket, Key: key, Owner: k.owners[owner]})
		return len(out) < n
	})
	return copyEntryKeys(out)
}

// EntriesForBuckets returns the entries of the given buckets (to hand them to
// the task that now owns those buckets), in insertion order. Keys are copies.
func (k *KLT) EntriesForBuckets(buckets []int) []Entry {
	set := bucketSet(buckets)
	k.mu.RLock()
	defer k.mu.RUnlock()
	var out []Entry
	k.t.walk(0, func(_ uint64, key []byte, bucket int, owner uint32) bool {
		if set.has(bucket) {
			out = append(out, Entry{Bucket: bucket, Key: key, Owner: k.owners[owner]})
		}
		return true
	})
	return copyEntryKeys(out)
}

// RemoveBuckets drops every entry of the given buckets.
func (k *KLT) RemoveBuckets(buckets []int) {
	set := bucketSet(buckets)
	k.mu.Lock()
	defer k.mu.Unlock()
	var doomed [][]byte
	k.t.walk(0, func(_ uint64, key []byte, bucket int, _ uint32) bool {
		if set.has(bucket) {
			doomed = append(doomed, key) // aliases the arena; valid until removals compact it
		}
		return true
	})
	for _, key := range doomed {
		if i := k.t.find(key, kltHash(key)); i >= 0 {
			k.t.removeAt(i)
		}
	}
	k.shrinkLocked()
}

// Buckets returns how many entries each bucket has (for planning and
// status); buckets without entries are absent.
func (k *KLT) Buckets() map[int]int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make(map[int]int)
	k.t.walk(0, func(_ uint64, _ []byte, bucket int, _ uint32) bool {
		out[bucket]++
		return true
	})
	return out
}

// AddEntries adds entries (e.g. received from a handoff) under one lock.
func (k *KLT) AddEntries(entries []Entry) error {
	for _, e := range entries {
		if e.Owner == "" {
			return fmt.Errorf("statesvc: KLT entry for key %q has empty owner", e.Key)
		}
		if err := CheckBucket(e.Bucket); err != nil {
			return fmt.Errorf("statesvc: KLT entry for key %q: %w", e.Key, err)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, e := range entries {
		k.t.put(e.Key, e.Bucket, k.internOwner(e.Owner))
	}
	return nil
}

// copyEntryKeys replaces arena-aliasing keys with copies in one allocation.
func copyEntryKeys(es []Entry) []Entry {
	total := 0
	for _, e := range es {
		total += len(e.Key)
	}
	buf := make([]byte, 0, total)
	for i := range es {
		s := len(buf)
		buf = append(buf, es[i].Key...)
		es[i].Key = buf[s:len(buf):len(buf)]
	}
	return es
}

type bucketBits [MaxBuckets / 64]uint64

func bucketSet(buckets []int) *bucketBits {
	var s bucketBits
	for _, b := range buckets {
		if b >= 0 && b < MaxBuckets {
			s[b/64] |= 1 << (b % 64)
		}
	}
	return &s
}

func (s *bucketBits) has(b int) bool { return s[b/64]&(1<<(b%64)) != 0 }
