package statesvc

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// KLT is the key lookup table of lazy (Koala) migration, kept per task: for
// the keys of buckets that moved to this task whose values are not yet
// migrated, the owner task that physically holds the value. Safe for
// concurrent use (the task's batch path and a background migrator).
//
// It stores no keys, only a multiset of (32-bit key hash, owner) entries per
// bucket, so it may answer "remote" for a key that is local (a false
// positive, about n/2^32 for a bucket of n entries: the caller fetches,
// finds nothing and uses the local value) but never "local" for a key that
// is remote: an entry is dropped only when the caller says the key's value
// was taken from that owner (RemoveKeys), when the owner has no more keys of
// the bucket (DropSegment), or when the bucket leaves the task
// (RemoveBuckets). Keys whose hash matches entries of several owners are
// reported with all of them (see SplitOwners).
//
// Memory: per entry about 32 - log2(entries per bucket) + 5.3 bits (hashes
// split into a group directory and packed low bits, see hashSeq; a dead
// bit only once entries are removed, owner bits only when a bucket has
// several owners): measured 3.2 B per key on the heap at 1 M keys in 128
// buckets and 2.6 B at 10 M (BenchmarkKLTMemory, BenchmarkKLTMemory10M);
// owner names are interned once. LookupBatchRefs resolves a key with two
// dependent memory accesses (directory, then remainders), overlapped
// across keys (see lookupGroup).
type KLT struct {
	mu       sync.RWMutex
	nb       int
	nbMask   uint64       // nb-1 if nb is a power of two (bucket = hash & nbMask), else 0
	buckets  []*kltBucket // by bucket; nil = no entries
	live     int
	dirty    []int // buckets with buffered additions, merged before lookups
	owners   []string
	ownerIdx map[string]uint32
}

// OwnerSep separates the owners Lookup and the batch lookups report for a
// key whose hash matches entries of several owners. Owner names never
// contain it.
const OwnerSep = "\x00"

// SplitOwners splits an owner reported by Lookup or LookupBatch into the
// owners to fetch from (usually one).
func SplitOwners(s string) []string {
	if !strings.Contains(s, OwnerSep) {
		return []string{s}
	}
	return strings.Split(s, OwnerSep)
}

// BucketOf maps a key to one of n buckets. Every component that partitions
// by key (routing, state layout, migration, the KLT) must use this one
// function; the KLT relies on it to find a key's bucket from its hash.
func BucketOf(key []byte, n int) int { return bucketOfHash(keyHash(key), n) }

func bucketOfHash(h uint64, n int) int {
	if n <= 1 {
		return 0
	}
	return int(h % uint64(n))
}

// kltHash returns the bucket (of nb) and the 32-bit hash the KLT keeps for
// key. The hash uses the high half of the 64-bit hash, which the bucket
// (taken modulo the bucket count) hardly depends on.
func kltHash(key []byte, nb int) (bucket int, h uint32) {
	x := keyHash(key)
	return bucketOfHash(x, nb), uint32(x >> 32)
}

// KLTHash returns the bucket (of numBuckets) and the 32-bit hash a key
// lookup table keeps for key, so a task can hand over hashes (Segment)
// instead of keys.
func KLTHash(key []byte, numBuckets int) (bucket int, hash uint32) {
	return kltHash(key, max(1, numBuckets))
}

// KeyHash is the 64-bit hash of key that KLTHash splits into a bucket and
// a 32-bit hash (SplitKeyHash). A task indexing its own keys by it tells
// apart keys whose 32-bit lookup table hashes collide, and still hands
// over the hashes the table keeps.
func KeyHash(key []byte) uint64 { return keyHash(key) }

// SplitKeyHash returns the bucket and lookup table hash of a key whose
// KeyHash is x: KLTHash(key, numBuckets) == SplitKeyHash(KeyHash(key), numBuckets).
func SplitKeyHash(x uint64, numBuckets int) (bucket int, hash uint32) {
	return bucketOfHash(x, max(1, numBuckets)), uint32(x >> 32)
}

// NewKLT returns an empty key lookup table for keys spread over numBuckets
// buckets with BucketOf (numBuckets <= 1: one bucket). It panics if
// numBuckets exceeds MaxBuckets (a programming error).
func NewKLT(numBuckets int) *KLT {
	if numBuckets > MaxBuckets {
		panic(fmt.Sprintf("statesvc: KLT of %d buckets, at most %d allowed", numBuckets, MaxBuckets))
	}
	k := &KLT{nb: max(1, numBuckets), ownerIdx: make(map[string]uint32)}
	if k.nb&(k.nb-1) == 0 {
		k.nbMask = uint64(k.nb - 1)
	}
	return k
}

// NumBuckets returns the bucket count the table was made for.
func (k *KLT) NumBuckets() int { return k.nb }

func checkOwner(owner string) error {
	if owner == "" {
		return fmt.Errorf("statesvc: KLT owner is empty")
	}
	if strings.Contains(owner, OwnerSep) {
		return fmt.Errorf("statesvc: KLT owner %q contains a NUL byte", owner)
	}
	return nil
}

func (k *KLT) internOwner(owner string) uint32 {
	if i, ok := k.ownerIdx[owner]; ok {
		return i
	}
	i := uint32(len(k.owners))
	k.owners = append(k.owners, owner)
	k.ownerIdx[owner] = i
	return i
}

func (k *KLT) bucket(b int) *kltBucket {
	if k.buckets == nil {
		k.buckets = make([]*kltBucket, k.nb)
	}
	if k.buckets[b] == nil {
		k.buckets[b] = &kltBucket{seq: emptyHashSeq}
	}
	if len(k.buckets[b].extra) == 0 {
		k.dirty = append(k.dirty, b) // about to buffer an addition
	}
	return k.buckets[b]
}

// flush merges the buffered additions of every bucket into its sequence, so
// lookups probe one structure. Additions come in runs per bucket (a handoff
// streams bucket after bucket), so this rebuilds each bucket a few times per
// handoff, not once per batch.
func (k *KLT) flush() {
	if len(k.dirty) == 0 {
		return
	}
	k.mu.RUnlock()
	k.mu.Lock()
	for _, bi := range k.dirty {
		if bi < len(k.buckets) && k.buckets[bi] != nil && len(k.buckets[bi].extra) > 0 {
			k.buckets[bi].rebuild(-1)
		}
	}
	k.dirty = k.dirty[:0]
	k.mu.Unlock()
	k.mu.RLock()
}

// Add records that key's value is held by owner. Adding a key again adds
// another entry (a key then reads as remote until every entry is gone).
// bucket must be BucketOf(key, NumBuckets()). It panics on an empty owner
// or a wrong bucket (programming errors).
func (k *KLT) Add(bucket int, key []byte, owner string) {
	if err := checkOwner(owner); err != nil {
		panic(err.Error())
	}
	b, h := kltHash(key, k.nb)
	if b != bucket {
		panic(fmt.Sprintf("statesvc: KLT.Add of a key of bucket %d as bucket %d", b, bucket))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.bucket(b).add(h, k.internOwner(owner))
	k.live++
}

// Segment is the content of one (bucket, owner) part of a table, as handed
// from an old owner to a new one: the key hashes, sorted.
type Segment struct {
	Bucket int
	Owner  string
	Hashes []uint32
}

// AddSegment adds the entries of s (e.g. received from a handoff); its
// hashes need not be sorted, but sorted ones are not copied.
func (k *KLT) AddSegment(s Segment) error {
	if err := checkOwner(s.Owner); err != nil {
		return err
	}
	if s.Bucket < 0 || s.Bucket >= k.nb {
		return fmt.Errorf("statesvc: KLT segment of bucket %d, table has buckets [0, %d)", s.Bucket, k.nb)
	}
	if len(s.Hashes) == 0 {
		return nil
	}
	hs := s.Hashes
	if !slices.IsSorted(hs) {
		hs = slices.Sorted(slices.Values(hs))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// One merge per segment: a handoff of millions of keys added one by
	// one copied each entry about kltExtraFrac times and held the new
	// owner's task for most of a second.
	k.bucket(s.Bucket).addSorted(hs, k.internOwner(s.Owner))
	k.live += len(hs)
	return nil
}

// Segments returns the entries of the given buckets grouped by (bucket,
// owner), in bucket order (to hand them to the task that now owns those
// buckets).
func (k *KLT) Segments(buckets []int) []Segment {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.segmentsLocked(buckets)
}

func (k *KLT) segmentsLocked(buckets []int) []Segment {
	var out []Segment
	for _, bi := range slices.Compact(slices.Sorted(slices.Values(buckets))) {
		if bi < 0 || bi >= len(k.buckets) || k.buckets[bi] == nil {
			continue
		}
		byOwner := map[uint32][]uint32{}
		var order []uint32
		k.buckets[bi].entries(func(h, o uint32) {
			if _, ok := byOwner[o]; !ok {
				order = append(order, o)
			}
			byOwner[o] = append(byOwner[o], h)
		})
		slices.Sort(order)
		for _, o := range order {
			out = append(out, Segment{Bucket: bi, Owner: k.owners[o], Hashes: byOwner[o]})
		}
	}
	return out
}

// Owners lists the owners that still have entries, sorted (a
// checkpoint's part may name only owners whose parts it also holds).
func (k *KLT) Owners() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.live == 0 {
		return nil
	}
	has := make([]bool, len(k.owners))
	for _, b := range k.buckets {
		if b != nil && b.live() > 0 {
			b.entries(func(_, o uint32) { has[o] = true })
		}
	}
	var out []string
	for o, ok := range has {
		if ok {
			out = append(out, k.owners[o])
		}
	}
	slices.Sort(out)
	return out
}

// Lookup returns the task holding key's value, if the key is not yet local
// (several owners joined with OwnerSep when entries of several match).
func (k *KLT) Lookup(key []byte) (owner string, ok bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	k.flush()
	o := k.lookupLocked(key)
	return o, o != ""
}

func (k *KLT) lookupLocked(key []byte) string {
	if k.live == 0 {
		return ""
	}
	bi, h := kltHash(key, k.nb)
	b := k.buckets[bi]
	if b == nil {
		return ""
	}
	o, ok, more := b.first(h)
	switch {
	case !ok:
		return ""
	case !more:
		return k.owners[o]
	}
	var names []string
	b.each(h, func(o uint32, _, _ int) bool {
		if !slices.Contains(names, k.owners[o]) {
			names = append(names, k.owners[o])
		}
		return true
	})
	slices.Sort(names)
	return strings.Join(names, OwnerSep)
}

// RemoveKeys says the values of keys were taken from owner (they are local
// now): one entry (hash, owner) is dropped per key. Call it only for keys
// whose value owner actually had, never for a key a fetch found absent: its
// hash may belong to another key that is still remote.
func (k *KLT) RemoveKeys(owner string, keys [][]byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	o, ok := k.ownerIdx[owner]
	if !ok || k.live == 0 {
		return
	}
	for _, key := range keys {
		bi, h := kltHash(key, k.nb)
		if b := k.buckets[bi]; b != nil && b.remove(h, o) {
			k.live--
		}
	}
	k.shrinkLocked()
}

// Next returns a (bucket, owner) pair that still has entries, for
// progressive migration: lowest bucket first, then lowest owner index.
func (k *KLT) Next() (bucket int, owner string, ok bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for bi, b := range k.buckets {
		if b == nil || b.live() == 0 {
			continue
		}
		best := uint32(len(k.owners))
		b.entries(func(_, o uint32) { best = min(best, o) })
		return bi, k.owners[best], true
	}
	return 0, "", false
}

// DropSegment removes every entry of (bucket, owner): the owner holds no
// more keys of the bucket.
func (k *KLT) DropSegment(bucket int, owner string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	o, ok := k.ownerIdx[owner]
	if !ok || bucket < 0 || bucket >= len(k.buckets) || k.buckets[bucket] == nil {
		return
	}
	k.live -= k.buckets[bucket].dropOwner(o)
	if k.buckets[bucket].live() == 0 {
		k.buckets[bucket] = nil
	}
	k.shrinkLocked()
}

// RemoveBuckets drops every entry of the given buckets.
func (k *KLT) RemoveBuckets(buckets []int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, bi := range buckets {
		if bi >= 0 && bi < len(k.buckets) && k.buckets[bi] != nil {
			k.live -= k.buckets[bi].live()
			k.buckets[bi] = nil
		}
	}
	k.shrinkLocked()
}

func (k *KLT) shrinkLocked() {
	if k.live == 0 {
		k.buckets, k.dirty = nil, nil
		if len(k.owners) > 0 {
			k.owners, k.ownerIdx = nil, make(map[string]uint32)
		}
	}
}

// Len returns the number of entries in the table.
func (k *KLT) Len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.live
}

// Bytes returns the approximate memory footprint in bytes (KLT-size metric).
func (k *KLT) Bytes() uint64 {
	k.mu.RLock()
	defer k.mu.RUnlock()
	n := uint64(128 + 8*cap(k.buckets))
	for _, b := range k.buckets {
		if b != nil {
			n += b.bytes()
		}
	}
	for _, o := range k.owners {
		n += uint64(len(o)) + 16 + 16 + 8 // name, slice entry, map entry
	}
	return n
}

// Buckets returns how many entries each bucket has (for planning and
// status); buckets without entries are absent.
func (k *KLT) Buckets() map[int]int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make(map[int]int)
	for bi, b := range k.buckets {
		if b != nil && b.live() > 0 {
			out[bi] = b.live()
		}
	}
	return out
}
