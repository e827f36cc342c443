package statesvc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// KLT wire/persistence format (small, self-checking):
//
//	"KLT2" | uvarint numBuckets | uvarint nOwners | nOwners × (uvarint len | name)
//	| uvarint nSegments | nSegments × (uvarint bucket | uvarint owner
//	  | uvarint nHashes | nHashes × uvarint (hash − previous hash, sorted))
//	| crc32-C of everything before (4 bytes LE)
//
// Segments appear in (bucket, owner) order with sorted hashes, so Encode is
// canonical: equal tables encode to equal bytes.

var kltMagic = []byte("KLT2")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Encode serializes the table (for persistence or a handoff).
func (k *KLT) Encode() []byte {
	k.mu.RLock()
	defer k.mu.RUnlock()
	all := make([]int, 0, len(k.buckets))
	for bi, b := range k.buckets {
		if b != nil {
			all = append(all, bi)
		}
	}
	segs := k.segmentsLocked(all)
	buf := append([]byte(nil), kltMagic...)
	buf = binary.AppendUvarint(buf, uint64(k.nb))
	buf = binary.AppendUvarint(buf, uint64(len(k.owners)))
	for _, o := range k.owners {
		buf = binary.AppendUvarint(buf, uint64(len(o)))
		buf = append(buf, o...)
	}
	buf = binary.AppendUvarint(buf, uint64(len(segs)))
	for _, s := range segs {
		buf = binary.AppendUvarint(buf, uint64(s.Bucket))
		buf = binary.AppendUvarint(buf, uint64(k.ownerIdx[s.Owner]))
		buf = binary.AppendUvarint(buf, uint64(len(s.Hashes)))
		prev := uint32(0)
		for _, h := range s.Hashes {
			buf = binary.AppendUvarint(buf, uint64(h-prev))
			prev = h
		}
	}
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, crcTable))
}

// errKLTCorrupt is wrapped by every DecodeKLT error.
var errKLTCorrupt = errors.New("statesvc: corrupt key lookup table")

// DecodeKLT parses the output of Encode. Garbage input yields an error, never
// a panic or an outsized allocation.
func DecodeKLT(data []byte) (*KLT, error) {
	if len(data) < len(kltMagic)+4 || string(data[:len(kltMagic)]) != string(kltMagic) {
		return nil, fmt.Errorf("%w: missing %q header", errKLTCorrupt, kltMagic)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, crcTable); got != sum {
		return nil, fmt.Errorf("%w: checksum %08x, want %08x", errKLTCorrupt, got, sum)
	}
	d := kltDecoder{b: body[len(kltMagic):]}
	nb := d.uvarint("bucket count")
	if d.err == nil && (nb < 1 || nb > MaxBuckets) {
		d.fail("bucket count %d outside [1, %d]", nb, MaxBuckets)
	}
	if d.err != nil {
		return nil, d.err
	}
	k := NewKLT(int(nb))
	nOwners := d.count("owner count", 1)
	for i := uint64(0); i < nOwners && d.err == nil; i++ {
		name := string(d.bytes("owner name"))
		if d.err != nil {
			break
		}
		if err := checkOwner(name); err != nil {
			d.fail("owner %d: %v", i, err)
		}
		if _, dup := k.ownerIdx[name]; dup && d.err == nil {
			d.fail("owner %q listed twice", name)
		}
		k.internOwner(name)
	}
	nSegs := d.count("segment count", 3)
	for i := uint64(0); i < nSegs && d.err == nil; i++ {
		bucket := d.uvarint("bucket")
		owner := d.uvarint("owner")
		n := d.count("hash count", 1)
		switch {
		case d.err != nil:
			continue
		case bucket >= nb:
			d.fail("segment %d: bucket %d of %d", i, bucket, nb)
			continue
		case owner >= uint64(len(k.owners)):
			d.fail("segment %d: owner index %d of %d", i, owner, len(k.owners))
			continue
		}
		b, o := k.bucket(int(bucket)), uint32(owner)
		h := uint64(0)
		for j := uint64(0); j < n && d.err == nil; j++ {
			h += d.uvarint("hash")
			if h > 1<<32-1 {
				d.fail("segment %d: hash %d out of range", i, h)
				break
			}
			b.add(uint32(h), o)
			k.live++
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	for bi, b := range k.buckets {
		if b != nil && b.live() == 0 {
			k.buckets[bi] = nil
		}
	}
	if k.live == 0 {
		k.buckets = nil
	}
	return k, nil
}

type kltDecoder struct {
	b   []byte
	err error
}

func (d *kltDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errKLTCorrupt, fmt.Sprintf(format, args...))
	}
}

func (d *kltDecoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad %s varint", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads an element count and rejects counts the remaining input cannot
// hold at minSize bytes per element.
func (d *kltDecoder) count(what string, minSize uint64) uint64 {
	v := d.uvarint(what)
	if d.err == nil && v > uint64(len(d.b))/minSize {
		d.fail("%s %d exceeds the %d bytes left", what, v, len(d.b))
		return 0
	}
	return v
}

func (d *kltDecoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("%s of %d bytes, %d left", what, n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}
