package statesvc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// KLT wire/persistence format (little state, self-checking):
//
//	"KLT1" | uvarint nOwners | nOwners × (uvarint len | name)
//	| uvarint nEntries | nEntries × (uvarint bucket | uvarint owner | uvarint len | key)
//	| crc32-C of everything before (4 bytes LE)
//
// Entries appear in insertion order, so Take's order survives a round trip.

var kltMagic = []byte("KLT1")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Encode serializes the table (for persistence with the task's state or a
// handoff to another task).
func (k *KLT) Encode() []byte {
	k.mu.RLock()
	defer k.mu.RUnlock()
	buf := make([]byte, 0, 16+int(k.t.liveBytes)+4*k.t.live)
	buf = append(buf, kltMagic...)
	buf = binary.AppendUvarint(buf, uint64(len(k.owners)))
	for _, o := range k.owners {
		buf = binary.AppendUvarint(buf, uint64(len(o)))
		buf = append(buf, o...)
	}
	buf = binary.AppendUvarint(buf, uint64(k.t.live))
	k.t.walk(0, func(_ uint64, key []byte, bucket int, owner uint32) bool {
		buf = binary.AppendUvarint(buf, uint64(bucket))
		buf = binary.AppendUvarint(buf, uint64(owner))
		buf = binary.AppendUvarint(buf, uint64(len(key)))
		buf = append(buf, key...)
		return true
	})
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
	nOwners := d.count("owner count", 1)
	k := NewKLT()
	for i := uint64(0); i < nOwners && d.err == nil; i++ {
		name := string(d.bytes("owner name"))
		if d.err == nil && name == "" {
			d.fail("owner %d has an empty name", i)
		}
		if _, dup := k.ownerIdx[name]; dup && d.err == nil {
			d.fail("owner %q listed twice", name)
		}
		k.internOwner(name)
	}
	nEntries := d.count("entry count", 3)
	for i := uint64(0); i < nEntries && d.err == nil; i++ {
		bucket := d.uvarint("bucket")
		owner := d.uvarint("owner")
		key := d.bytes("key")
		switch {
		case d.err != nil:
		case bucket >= MaxBuckets:
			d.fail("entry %d: bucket %d out of range", i, bucket)
		case owner >= uint64(len(k.owners)):
			d.fail("entry %d: owner index %d of %d", i, owner, len(k.owners))
		default:
			k.t.put(key, int(bucket), uint32(owner))
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
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
