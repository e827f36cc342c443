//go:build !purego

package statesvc

import (
	"math/bits"

	"golang.org/x/sys/cpu"
)

// kltProbeAsm is whether the assembly passes can run: kltProbeMatch
// shifts with BMI2's SHRX and SHLX.
var kltProbeAsm = cpu.X86.HasBMI2

// kltProbeScratch carries the probe's per-key values from one pass to
// the next. It holds addresses as uintptr: they point into buckets and
// sequences the table keeps alive and does not change while the read
// lock is held, and the collector does not move heap objects.
type kltProbeScratch struct {
	b   [kltGroupSize]uintptr // the key's bucket (kltNoBucket for none)
	rec [kltGroupSize]uintptr // its directory record
	j   [kltGroupSize]uint64  // its group's index in the record
	lo  [kltGroupSize]uint64  // its group's first element
	n   [kltGroupSize]uint64  // its group's size
}

// kltZeroRecord is the directory record kltProbeRems reads for a key of
// a bucket that is not fast: one empty group.
var kltZeroRecord [64]byte

// kltProbeDirs, kltProbeRems and kltProbeMatch are lookupGroup's three
// passes in assembly, for the keys whose 64-bit hashes are xs[:n] (n <=
// kltGroupSize) in a table whose bucket count is a power of two, mask+1.
// Each pass leaves its results in sc and prefetches the memory the next
// pass reads, rather than loading it: a load that misses the cache holds
// up the instructions behind it, a prefetch does not, so the misses of
// all n keys are in flight together (lookupBatchFast runs other groups'
// passes in between, while they arrive).
//
// kltProbeDirs finds each key's bucket, group and directory record;
// kltProbeRems reads the group's bounds from the record; kltProbeMatch
// compares the key's remainder with those of the group's first
// kltMatchWidth8 elements without branches and writes its ref to out[i].
// kltProbeDirs and kltProbeMatch return a bit i set for each key they
// leave to the general path: its bucket is not fast, its group has more
// than kltMatchWidth8 elements, or it matches several entries of a
// bucket with removed ones.
//
//go:noescape
func kltProbeDirs(buckets **kltBucket, mask uint64, xs *uint64, n int, sc *kltProbeScratch) (rare uint64)

//go:noescape
func kltProbeRems(n int, sc *kltProbeScratch)

//go:noescape
func kltProbeMatch(xs *uint64, n int, sc *kltProbeScratch, out *uint32) (rare uint64)

// kltHashKeys sets xs[i] to keyHash(keys[i]) for each of the n keys
// shorter than 32 bytes (the usual record key) and returns a bit i set
// for each longer one, which it leaves to the caller. Compiled Go keeps
// fewer of XXH64's constants in registers and spills around the steps,
// which made hashing a quarter of a batch lookup of 9-byte keys.
//
//go:noescape
func kltHashKeys(keys *[]byte, n int, xs *uint64) (long uint64)

// kltMatchWidth8 is how many elements of a group kltProbeMatch compares:
// four words of two remainders each.
const kltMatchWidth8 = 8

// kltProbeStage is one group of keys on its way through the passes.
type kltProbeStage struct {
	xs      [kltGroupSize]uint64
	sc      kltProbeScratch
	rare    uint64
	base, n int
}

// lookupBatchFast resolves keys into out (as long as keys) with the
// assembly passes, appending to slow (as an index into keys) the keys
// left to the general path; it returns slow and false, having done
// nothing, if the assembly cannot run here (no BMI2, or a bucket count
// that is not a power of two). The passes of consecutive groups are
// pipelined: while the prefetches of one group's pass are in flight, the
// earlier passes of the next group run.
func (k *KLT) lookupBatchFast(keys [][]byte, out []uint32, slow []int) ([]int, bool) {
	if !kltProbeAsm || k.buckets == nil || k.nbMask == 0 && k.nb != 1 {
		return slow, false
	}
	var st [3]kltProbeStage
	groups := (len(keys) + kltGroupSize - 1) / kltGroupSize
	for t := 0; t < groups+2; t++ {
		if t < groups {
			s := &st[t%3]
			s.base = t * kltGroupSize
			s.n = min(kltGroupSize, len(keys)-s.base)
			long := kltHashKeys(&keys[s.base], s.n, &s.xs[0])
			for ; long != 0; long &= long - 1 {
				i := bits.TrailingZeros64(long)
				s.xs[i] = keyHash(keys[s.base+i])
			}
			s.rare = kltProbeDirs(&k.buckets[0], k.nbMask, &s.xs[0], s.n, &s.sc)
		}
		if t >= 1 && t-1 < groups {
			s := &st[(t-1)%3]
			kltProbeRems(s.n, &s.sc)
		}
		if t >= 2 {
			s := &st[(t-2)%3]
			s.rare |= kltProbeMatch(&s.xs[0], s.n, &s.sc, &out[s.base])
			if s.rare != 0 {
				end := s.base + s.n
				slow = k.lookupRare(keys[s.base:end], out[s.base:end], s.base, s.rare, slow)
			}
		}
	}
	return slow, true
}

// lookupRare resolves with lookupGroup the keys of group whose bits are
// set in rare, writing their refs to out and appending those it leaves to
// the general path to slow (as first+index).
func (k *KLT) lookupRare(group [][]byte, out []uint32, first int, rare uint64, slow []int) []int {
	var (
		keys [kltGroupSize][]byte
		idx  [kltGroupSize]int
		refs [kltGroupSize]uint32
	)
	n := 0
	for ; rare != 0; rare &= rare - 1 {
		i := bits.TrailingZeros64(rare)
		keys[n], idx[n] = group[i], i
		n++
	}
	mark := len(slow)
	slow = k.lookupGroup(keys[:n], refs[:n], 0, slow)
	for j := range n {
		out[idx[j]] = refs[j]
	}
	for s := mark; s < len(slow); s++ {
		slow[s] = first + idx[slow[s]]
	}
	return slow
}
