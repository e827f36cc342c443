package statesvc

import (
	"encoding/binary"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// XXH64 primes (from the XXH64 specification).
const (
	xxPrime1 uint64 = 0x9E3779B185EBCA87
	xxPrime2 uint64 = 0xC2B2AE3D27D4EB4F
	xxPrime3 uint64 = 0x165667B19E3779F9
	xxPrime4 uint64 = 0x85EBCA77C2B2AE63
	xxPrime5 uint64 = 0x27D4EB2F165667C5
)

// keyHash is XXH64 with seed 0 of key — exactly xxhash.Sum64 — computed
// in Go for keys shorter than 32 bytes (the usual record key), which skips
// the assembly routine's call overhead and its long-input setup: the KLT's
// batch lookup hashes every key of every batch. Longer keys use
// xxhash.Sum64. TestKeyHashIsXXH64 checks the two agree.
func keyHash(key []byte) uint64 {
	n := len(key)
	if n >= 32 {
		return xxhash.Sum64(key)
	}
	// Straight-line code, no loops: the steps a length needs are known
	// from its bits, and each branch goes the same way for keys of one
	// length (a batch's keys usually share theirs).
	h := xxPrime5 + uint64(n)
	if n >= 8 {
		h = xxMerge8(h, binary.LittleEndian.Uint64(key))
		if n >= 16 {
			h = xxMerge8(h, binary.LittleEndian.Uint64(key[8:]))
			if n >= 24 {
				h = xxMerge8(h, binary.LittleEndian.Uint64(key[16:]))
			}
		}
	}
	t := key[n&^7:]
	if n&4 != 0 {
		h ^= uint64(binary.LittleEndian.Uint32(t)) * xxPrime1
		h = bits.RotateLeft64(h, 23)*xxPrime2 + xxPrime3
		t = t[4:]
	}
	if len(t) > 0 {
		h = xxMerge1(h, t[0])
		if len(t) > 1 {
			h = xxMerge1(h, t[1])
			if len(t) > 2 {
				h = xxMerge1(h, t[2])
			}
		}
	}
	return xxAvalanche(h)
}

// keyHash8 is keyHash of an 8-byte key whose little-endian value is v,
// small enough to be inlined into the batch lookup's hashing loop.
func keyHash8(v uint64) uint64 { return xxAvalanche(xxMerge8(xxPrime5+8, v)) }

// keyHash16 is keyHash of a 16-byte key whose little-endian halves are v0
// and v1.
func keyHash16(v0, v1 uint64) uint64 { return xxAvalanche(xxMerge8(xxMerge8(xxPrime5+16, v0), v1)) }

func xxRound(v uint64) uint64 { return bits.RotateLeft64(v*xxPrime2, 31) * xxPrime1 }

// xxMerge8 and xxMerge1 are XXH64's steps for a remaining 8-byte word and
// a remaining byte of a short input.
func xxMerge8(h, v uint64) uint64 { return bits.RotateLeft64(h^xxRound(v), 27)*xxPrime1 + xxPrime4 }

func xxMerge1(h uint64, c byte) uint64 {
	return bits.RotateLeft64(h^uint64(c)*xxPrime5, 11) * xxPrime1
}

func xxAvalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}
