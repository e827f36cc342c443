package statesvc

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestHashSeq checks equalRange, kltGroupMatch and each against the sorted input: random
// values with duplicates and both ends of the range at sizes around the
// directory's steps, and the edge cases of the directory — no or one
// element, every value in one group and clusters (which force the wide
// directory), and the maximum value.
func TestHashSeq(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	random := func(n int) []uint32 {
		vals := make([]uint32, n)
		for i := range vals {
			switch rng.IntN(20) {
			case 0:
				vals[i] = 0
			case 1:
				vals[i] = 1<<32 - 1
			case 2:
				if i > 0 {
					vals[i] = vals[i-1] // duplicate
					continue
				}
			default:
				vals[i] = rng.Uint32()
			}
		}
		return vals
	}
	repeat := func(n int, v uint32) []uint32 { return slices.Repeat([]uint32{v}, n) }
	cases := []struct {
		name string
		vals []uint32
		wide int // 1: wide directory expected, 0: records, -1: not checked
	}{
		{"empty", nil, -1},
		{"one", []uint32{12345}, 0},
		{"one max", []uint32{1<<32 - 1}, 0},
		{"one zero", []uint32{0}, 0},
		{"two max", repeat(2, 1<<32-1), 0},
		{"all max", repeat(70_000, 1<<32-1), 1}, // the last group holds all
		{"all zero", repeat(70_000, 0), 1},
		{"one group", func() []uint32 { // n = 1000: 9 directory bits, all in group 4
			v := make([]uint32, 1000)
			for i := range v {
				v[i] = 4<<23 | rng.Uint32N(1<<23)
			}
			return v
		}(), 1},
		{"two clusters", func() []uint32 { // 200 in group 0, 200 in group 12 (of 256): one block of 400
			v := make([]uint32, 0, 400)
			for range 200 {
				v = append(v, rng.Uint32N(1<<24), 12<<24|rng.Uint32N(1<<24))
			}
			return v
		}(), 1},
		{"spread", func() []uint32 { // no clusters: the largest blocks
			v := make([]uint32, 78_125)
			for i := range v {
				v[i] = rng.Uint32()
			}
			return v
		}(), 0},
		{"top bits only", func() []uint32 { // every value with its low 20 bits clear
			v := make([]uint32, 5000)
			for i := range v {
				v[i] = rng.Uint32() &^ (1<<20 - 1)
			}
			return v
		}(), -1},
	}
	for _, n := range []int{2, 3, 11, 12, 64, 255, 256, 257, 1000, 7812, 70_000, 78_125} {
		cases = append(cases, struct {
			name string
			vals []uint32
			wide int
		}{fmt.Sprint("random ", n), random(n), -1})
	}
	for _, c := range cases {
		vals := slices.Clone(c.vals)
		slices.Sort(vals)
		s := newHashSeq(vals)
		if s.n != len(vals) {
			t.Fatalf("%s: n = %d, want %d", c.name, s.n, len(vals))
		}
		if c.wide >= 0 && s.wide != (c.wide == 1) {
			t.Errorf("%s: wide %v, want %v (dbits %d)", c.name, s.wide, c.wide == 1, s.dbits)
		}
		var got []uint32
		s.each(func(i int, v uint32) {
			if i != len(got) {
				t.Fatalf("%s: each index %d, want %d", c.name, i, len(got))
			}
			got = append(got, v)
		})
		if !slices.Equal(got, vals) {
			t.Fatalf("%s: each returned %d values, differing from the input", c.name, len(got))
		}
		probe := func(v uint32) {
			lo, found := slices.BinarySearch(vals, v)
			hi := lo
			for hi < len(vals) && vals[hi] == v {
				hi++
			}
			if i, j := s.equalRange(v); (i != lo || j != hi) && (found || i != j) {
				t.Fatalf("%s: equalRange(%#x) = [%d, %d), want [%d, %d)", c.name, v, i, j, lo, hi)
			}
			// The batch path: group bounds from the directory, then the
			// branch-free compare of groups of up to kltMatchWidth.
			gl, gh := s.bounds(uint32(s.group(v)))
			if s.rbits > 28 {
				t.Fatalf("%s: %d-bit remainders, kltGroupMatch takes at most 28", c.name, s.rbits)
			}
			if n := gh - gl; n <= kltMatchWidth {
				w0, w2 := kltGroupWords(&s, gl, n)
				m := kltGroupMatch(w0, w2, v, uint64(s.rbits), n)
				at, eq := int(gl)+bits.TrailingZeros64(m), bits.OnesCount64(m)
				if eq != hi-lo || eq > 0 && at != lo {
					t.Fatalf("%s: group match of %#x = first %d, count %d, want first %d, count %d", c.name, v, at, eq, lo, hi-lo)
				}
			}
		}
		for i, v := range vals {
			// Every distinct value of small inputs, a sample of large ones
			// (a probe scans its group, which holds all values of some).
			if i > 0 && vals[i-1] == v || len(vals) > 3000 && rng.IntN(len(vals)) > 3000 && i != len(vals)-1 {
				continue
			}
			probe(v)
			probe(v - 1)
			probe(v + 1)
		}
		for _, v := range []uint32{0, 1, 1<<32 - 1, 1<<32 - 2} {
			probe(v)
		}
		for range 2000 {
			probe(rng.Uint32())
		}
	}
}

// TestHashSeqSize checks the coding stays within its budget: about
// 32 - log2(n) + 5.5 bits per element for spread values.
func TestHashSeqSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1000, 7812, 78_125, 500_000} {
		vals := make([]uint32, n)
		for i := range vals {
			vals[i] = rng.Uint32()
		}
		slices.Sort(vals)
		s := newHashSeq(vals)
		bits := 8 * float64(s.bytes()) / float64(n)
		if want := 32 - math.Log2(float64(n)) + 6.2; bits > want {
			t.Errorf("n=%d: %.2f bits per element, want <= %.2f", n, bits, want)
		}
		if avg := float64(n) / float64(uint64(1)<<s.dbits); avg < 1.4 || avg > 2.9 {
			t.Errorf("n=%d: %.1f elements per group, want 1.4 to 2.8", n, avg)
		}
		if s.wide {
			t.Errorf("n=%d: wide directory for spread values", n)
		}
	}
}

// TestKeyHashIsXXH64 checks keyHash against xxhash.Sum64 for every length
// around its 32-byte switch and its 8- and 4-byte steps: BucketOf and the
// KLT's stored hashes (persisted in encodings) depend on the exact values.
func TestKeyHashIsXXH64(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for n := 0; n <= 80; n++ {
		for range 200 {
			key := make([]byte, n)
			for i := range key {
				key[i] = byte(rng.Uint32())
			}
			if rng.IntN(10) == 0 {
				for i := range key {
					key[i] = 0xff
				}
			}
			if got, want := keyHash(key), xxhash.Sum64(key); got != want {
				t.Fatalf("keyHash(%x) = %#x, xxhash.Sum64 %#x", key, got, want)
			}
		}
	}
	if got, want := keyHash(nil), xxhash.Sum64(nil); got != want {
		t.Fatalf("keyHash(nil) = %#x, want %#x", got, want)
	}
}

// TestHashSeqDups checks the duplicate flag lookups rely on to skip the
// check for a second equal element.
func TestHashSeqDups(t *testing.T) {
	for _, c := range []struct {
		vals []uint32
		want bool
	}{{nil, false}, {[]uint32{7}, false}, {[]uint32{1, 2, 3}, false}, {[]uint32{1, 2, 2}, true}, {[]uint32{0, 0}, true}, {[]uint32{5, 1<<32 - 1, 1<<32 - 1}, true}} {
		if s := newHashSeq(c.vals); s.dups != c.want {
			t.Errorf("%v: dups %v, want %v", c.vals, s.dups, c.want)
		}
	}
}
