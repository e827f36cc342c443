package dataplane

import (
	"slices"
	"sync"

	"koala/statesvc"
)

// localIndex is the keys a task stores, per bucket, as their 64-bit key
// hashes (statesvc.KeyHash), kept as they are written, so a lazy handoff
// hands over the lookup table hashes of the buckets it gives away without
// listing them from the store. Listing reads every block of the buckets'
// keys, and with values stored beside the keys (below the store's value
// separation size) that is the whole state: borg's 3.15 M moving keys of
// 330 B cost the old owner 2.7 s of CPU at a 1 → 2 scale-out, during which
// the new owner held those buckets' records (EXPERIMENTS.md, "Section 5.2
// at GB scale").
//
// It may hold keys that are gone (a deleted or served key stays): a new
// owner that fetches such a key finds it absent everywhere and reads its
// own store, as for any lookup table false positive. It must not miss a
// stored key, so every write of the task's keyed state adds to it (but of
// a key the write's batch read from the store: indexHint), and a
// store filled another way (a restored snapshot or checkpoint) makes it
// incomplete until rebuilt from a listing (rebuild); while incomplete,
// handoffs list the store as before (localEntries).
//
// Its memory is 8 bytes per key, plus the hashes added since the bucket's
// last merge.
type localIndex struct {
	mu       sync.Mutex
	nb       int
	complete bool
	buckets  []localBucket
}

type localBucket struct {
	sorted []uint64 // sorted, distinct
	// recent are the hashes added since the last merge, in no order; they
	// may repeat or be in sorted too (merge drops those).
	recent []uint64
}

func newLocalIndex(numBuckets int) *localIndex {
	nb := max(1, numBuckets)
	return &localIndex{nb: nb, complete: true, buckets: make([]localBucket, nb)}
}

// indexHint is what a batch's read of a key it writes says about the key
// (addWrites), so the index need not look for it.
type indexHint uint8

const (
	// hintNone: nothing known; the key is looked for and added if missing.
	hintNone indexHint = iota
	// hintAbsent: the store did not hold the key when the batch read it;
	// it is added without looking for it first (see addLocked).
	hintAbsent
	// hintStored: the store held the key when the batch read it, so a
	// complete index has it (every store write adds to it, and a lazy
	// handoff keeps what it hands over: take), and an incomplete one is
	// rebuilt before it is used; nothing is done. Looking for each
	// rewritten key in its bucket's sorted hashes, a cache miss or two
	// per write, was 6-7 % of each q6* task's worker after a scale-out
	// (EXPERIMENTS.md, Section 5.2 at GB scale).
	hintStored
)

// addLocked indexes the key whose KeyHash is h. A key the caller knows to
// be new to the store (fresh) is added without looking for it first: a
// key once deleted or served may still be indexed, and merge drops the
// repeat. Over 10 M keys nearly every write is a new key, and the search
// in its bucket's sorted hashes, a cache miss at nearly every step, was
// 10 % of the keyed counter's CPU.
func (x *localIndex) addLocked(h uint64, fresh bool) {
	b, _ := statesvc.SplitKeyHash(h, x.nb)
	lb := &x.buckets[b]
	if !fresh && containsHash(lb.sorted, h) {
		return
	}
	lb.recent = append(lb.recent, h)
	// Merge once the recent hashes are an eighth of the sorted ones: each
	// key is copied a bounded number of times, and a key written again
	// before a merge repeats in recent a bounded number of times.
	if len(lb.recent) > 1024 && len(lb.recent) > len(lb.sorted)/8 {
		lb.merge()
	}
}

// containsHash reports whether h is in s, sorted and distinct key hashes,
// which are spread uniformly: each step guesses h's place from its value
// between the ends of what is left (interpolation), so a lookup touches a
// few cache lines where a binary search over a bucket of tens of thousands
// of hashes missed the cache at nearly every step (10 % of the keyed
// counter's CPU over 10 M keys, where nearly every write is a new key).
// After a few guesses it falls back to a binary search, so hashes that are
// not uniform cost no more than that.
func containsHash(s []uint64, h uint64) bool {
	lo, hi := 0, len(s) // h can only be in s[lo:hi]
	for range 6 {
		if hi-lo <= 16 {
			break
		}
		a, b := s[lo], s[hi-1]
		if h < a || h > b {
			return false
		}
		i := lo + int(float64(h-a)/float64(b-a)*float64(hi-1-lo))
		i = min(max(i, lo), hi-1)
		switch v := s[i]; {
		case v == h:
			return true
		case v < h:
			lo = i + 1
		default:
			hi = i
		}
	}
	_, ok := slices.BinarySearch(s[lo:hi], h)
	return ok
}

func (lb *localBucket) merge() {
	if len(lb.recent) == 0 {
		return
	}
	slices.Sort(lb.recent)
	add := slices.Compact(lb.recent)
	out := make([]uint64, 0, len(lb.sorted)+len(add))
	i, j := 0, 0
	for i < len(lb.sorted) && j < len(add) {
		switch a, b := lb.sorted[i], add[j]; {
		case a < b:
			out = append(out, a)
			i++
		case a > b:
			out = append(out, b)
			j++
		default:
			out = append(out, a)
			i, j = i+1, j+1
		}
	}
	out = append(out, lb.sorted[i:]...)
	out = append(out, add[j:]...)
	lb.sorted, lb.recent = out, lb.recent[:0]
}

// addKVs indexes the user keys of state writes (deletes too: the index
// may hold gone keys). Keys that do not parse are left out; the store
// holds none such.
func (x *localIndex) addKVs(kvs []statesvc.KV) { x.addWrites(kvs, nil) }

// addWrites is addKVs where hints[i] (hints nil: none) says what kvs[i]'s
// batch found when it read the key (indexHint). A user key's states come
// together and are added once; any of them held means the key is indexed,
// and one held state's write is skipped even where another of the key's
// states is added (a repeat, which merge drops).
func (x *localIndex) addWrites(kvs []statesvc.KV, hints []indexHint) {
	if x == nil || len(kvs) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	var last []byte
	for i := range kvs {
		h := hintNone
		if hints != nil {
			h = hints[i]
		}
		if h == hintStored {
			continue // not even parsed: that was half of what is left
		}
		_, _, _, user, err := statesvc.SplitStateKey(kvs[i].Key)
		if err != nil || (last != nil && string(user) == string(last)) {
			continue // one user key's states come together
		}
		last = user
		x.addLocked(statesvc.KeyHash(user), h == hintAbsent)
	}
}

// addMoved indexes the user keys (as KeyHash) a bulk move brought. They
// are added without looking for them first: a bulk handoff takes its
// buckets' hashes out of the giver's index, so they are new here unless
// this task gave their bucket away lazily before, and merge drops such a
// repeat, as it drops a key's other states. The search per key was a
// sixth of a stop-and-restart new owner's install on borg.
func (x *localIndex) addMoved(hashes []uint64) {
	if x == nil || len(hashes) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, h := range hashes {
		x.addLocked(h, true)
	}
}

// invalidate marks the index incomplete: the store was filled without it.
func (x *localIndex) invalidate() {
	if x == nil {
		return
	}
	x.mu.Lock()
	x.complete = false
	clear(x.buckets)
	x.mu.Unlock()
}

// rebuild lists the operator's keys in the store and makes the index
// complete again. Only while nothing writes the store (a task not yet
// started): a write during the listing could be missed.
func (x *localIndex) rebuild(store statesvc.Store, opName string) error {
	if x == nil {
		return nil
	}
	prefix := statesvc.OperatorPrefix(opName)
	x.mu.Lock()
	defer x.mu.Unlock()
	clear(x.buckets)
	var last []byte
	err := statesvc.ExportKeys(store, []statesvc.KeyRange{{Start: prefix, End: statesvc.PrefixEnd(prefix)}}, func(k []byte) bool {
		_, _, _, user, err := statesvc.SplitStateKey(k)
		if err != nil || (last != nil && string(user) == string(last)) {
			return true
		}
		last = append(last[:0], user...)
		x.addLocked(statesvc.KeyHash(user), true) // listed once each
		return true
	})
	if err != nil {
		x.complete = false
		return err
	}
	for i := range x.buckets {
		x.buckets[i].merge()
	}
	x.complete = true
	return nil
}

// take returns, per bucket (indexed like buckets), the lookup table hashes
// of the buckets' keys, sorted, one per key, and with keep false removes
// the buckets from the index. ok is false when the index is incomplete:
// the caller lists the store instead.
//
// A lazy handoff keeps them: the values stay in the store until the new
// owner takes them, and one it never takes is still here if the bucket
// comes back, and must be handed over again when it leaves again. Removed,
// a 1 → 2 → 1 → 2 rescale handed over only the keys written here since the
// bucket came back, and the last new owner counted the others from zero
// (TestLazyRescaleBucketsComeBack). Keys taken meanwhile stay indexed as
// gone keys do. A bulk handoff moves every value of the buckets at once,
// so nothing of them stays to keep.
func (x *localIndex) take(buckets []int, keep bool) (hashes [][]uint32, ok bool) {
	if x == nil {
		return nil, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.complete {
		return nil, false
	}
	hashes = make([][]uint32, len(buckets))
	for i, b := range buckets {
		if b < 0 || b >= x.nb {
			continue
		}
		lb := &x.buckets[b]
		lb.merge()
		hs := make([]uint32, len(lb.sorted))
		for j, h := range lb.sorted {
			_, hs[j] = statesvc.SplitKeyHash(h, x.nb)
		}
		slices.Sort(hs)
		hashes[i] = hs
		if !keep {
			*lb = localBucket{}
		}
	}
	return hashes, true
}
