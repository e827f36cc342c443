//go:build !purego

package statesvc

import (
	"math/rand/v2"
	"testing"
)

// TestKLTHashKeys checks the assembly hash against keyHash for every key
// length up to 40 bytes (at every offset of its buffer), and that it
// leaves the keys of 32 bytes or more to the caller.
func TestKLTHashKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for round := range 200 {
		n := 1 + rng.IntN(kltGroupSize)
		keys := make([][]byte, n)
		for i := range keys {
			l := (round + i) % 41
			off := rng.IntN(len(buf) - l)
			keys[i] = buf[off : off+l : off+l]
		}
		var xs [kltGroupSize]uint64
		long := kltHashKeys(&keys[0], n, &xs[0])
		for i, key := range keys {
			isLong := long>>i&1 == 1
			if isLong != (len(key) >= 32) {
				t.Fatalf("key of %d bytes: left to the caller %v", len(key), isLong)
			}
			if !isLong && xs[i] != keyHash(key) {
				t.Fatalf("key %x (%d bytes): %#x, keyHash %#x", key, len(key), xs[i], keyHash(key))
			}
		}
		if long>>n != 0 {
			t.Fatalf("long bits past the %d keys: %#x", n, long)
		}
	}
}
