package statesvc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestKLTBatchPathsAgree builds tables in the shapes a handoff and a
// migration leave (one owner per bucket, keys being removed as they are
// fetched, keys added several times, buckets with several owners) and
// checks that LookupBatchRefs answers every present and absent key as
// the model and Lookup (the general path) do, and as lookupGroup, which
// it runs group by group, does on its own.
func TestKLTBatchPathsAgree(t *testing.T) {
	for _, nb := range []int{1, 2, 64, 100, 1024} {
		t.Run(fmt.Sprint("buckets=", nb), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(nb), 9))
			k := NewKLT(nb)
			m := kltModel{}
			var all [][]byte
			for i := range 30_000 {
				// 8- and 16-byte keys take the hash's fixed-size paths.
				var key []byte
				switch i % 4 {
				case 0:
					key = []byte(fmt.Sprintf("%08d", i))
				case 1:
					key = []byte(fmt.Sprintf("key-%012d", i))
				default:
					key = []byte(fmt.Sprint("k", i))
				}
				all = append(all, key)
				b := BucketOf(key, nb)
				owner := fmt.Sprint("task-", b%5)
				if b%7 == 3 && i%2 == 0 { // some buckets get a second owner
					owner = "task-other"
				}
				addKey(k, m, key, owner)
				if i%500 == 0 { // the same key held several times: long groups
					for range 3 + rng.IntN(8) {
						addKey(k, m, key, owner)
					}
				}
			}
			k.Lookup(nil) // merge the additions
			// Fetched keys leave the table: removed entries in buckets
			// that keep one owner.
			for i, key := range all {
				if i%3 != 0 {
					continue
				}
				os := m[string(key)]
				k.RemoveKeys(os[0], [][]byte{key})
				if len(os) == 1 {
					delete(m, string(key))
				} else {
					m[string(key)] = os[1:]
				}
			}
			for i := range 3000 {
				all = append(all, []byte(fmt.Sprint("absent-", i)))
			}
			rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })

			refs, names := k.LookupBatchRefs(all, nil)
			goRefs := make([]uint32, len(all))
			var goSlow []int
			k.mu.RLock()
			for base := 0; base < len(all); base += kltGroupSize {
				end := min(base+kltGroupSize, len(all))
				goSlow = k.lookupGroup(all[base:end], goRefs[base:end], base, goSlow)
			}
			k.mu.RUnlock()
			slowKey := map[int]bool{}
			for _, i := range goSlow {
				slowKey[i] = true
			}
			for i, key := range all {
				got := ""
				if refs[i] != 0 {
					got = names[refs[i]-1]
				}
				want, _ := k.Lookup(key)
				if got != want {
					t.Fatalf("LookupBatchRefs(%q) = %q, Lookup %q", key, got, want)
				}
				if owners := m[string(key)]; len(owners) > 0 && !slices.Contains(SplitOwners(got), owners[0]) {
					t.Fatalf("LookupBatchRefs(%q) = %q, model owners %q", key, got, owners)
				}
				if !slowKey[i] && refs[i] != goRefs[i] && !strings.Contains(got, OwnerSep) {
					t.Fatalf("key %q: ref %d, lookupGroup %d", key, refs[i], goRefs[i])
				}
			}
		})
	}
}

// TestKLTBatchGroupEnd stores, next to a key's group, an entry of the
// following group with the same remainder bits: the batch lookup compares
// whole words of remainders, and must not count one past the group's end.
func TestKLTBatchGroupEnd(t *testing.T) {
	const nb = 4
	for i := 0; ; i++ {
		key := []byte(fmt.Sprint("probe-", i))
		b, h := kltHash(key, nb)
		const rb = 32 - hashSeqMinDirBits // a bucket of a few entries has the widest remainders
		g := h >> rb
		if g+1 >= 1<<hashSeqMinDirBits {
			continue
		}
		k := NewKLT(nb)
		next := (g+1)<<rb | h&(1<<rb-1)
		if err := k.AddSegment(Segment{Bucket: b, Owner: "a", Hashes: []uint32{h ^ 1, next}}); err != nil {
			t.Fatal(err)
		}
		if got := k.LookupBatch([][]byte{key}, nil); got[0] != "" {
			t.Fatalf("key of hash %#x reads as held by %q: the entry %#x of the next group matched", h, got[0], next)
		}
		if err := k.AddSegment(Segment{Bucket: b, Owner: "a", Hashes: []uint32{h}}); err != nil {
			t.Fatal(err)
		}
		if got := k.LookupBatch([][]byte{key}, nil); got[0] != "a" {
			t.Fatalf("key of hash %#x added: reads as %q, want a", h, got[0])
		}
		return
	}
}

// TestKLTBatchKeyLengths looks up, in one batch, keys of every length up
// to 40 bytes sliced at random offsets of one buffer (as after decoding a
// batch): lookupGroup hashes 8- and 16-byte keys with its own inlined code
// and the others with keyHash, and every length must find its entry,
// with the batch's other keys (absent) left local unless Lookup says
// otherwise.
func TestKLTBatchKeyLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	const nb = 64
	for round := range 200 {
		n := 1 + rng.IntN(2*kltGroupSize)
		keys := make([][]byte, n)
		present := make([]bool, n)
		k := NewKLT(nb)
		for i := range keys {
			l := (round + i) % 41
			off := rng.IntN(len(buf) - l)
			keys[i] = buf[off : off+l : off+l]
			if present[i] = rng.IntN(2) == 0; present[i] {
				k.Add(BucketOf(keys[i], nb), keys[i], "old")
			}
		}
		refs, names := k.LookupBatchRefs(keys, nil)
		for i, key := range keys {
			got := ""
			if refs[i] != 0 {
				got = names[refs[i]-1]
			}
			want, _ := k.Lookup(key)
			if present[i] && want != "old" {
				t.Fatalf("key %x (%d bytes) added: Lookup %q", key, len(key), want)
			}
			if got != want {
				t.Fatalf("key %x (%d bytes, present %v): batch %q, Lookup %q", key, len(key), present[i], got, want)
			}
		}
	}
}
