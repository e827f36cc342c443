package statesvc

import (
	"encoding/binary"
	"fmt"
)

// Packed state is how a bulk move carries keyed state: each key and value
// after its uvarint length, one pair after another, keys in the store's
// layout. The old owner's store packs its buffered writes straight into
// this form (Pebble.MoveOutPacked), so nothing copies them a second time
// before they are sent.

// AppendPacked appends the pair (k, v) to dst.
func AppendPacked(dst, k, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func appendPackedString(dst []byte, k string, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// PackedSize is the room AppendPacked takes for a pair of these lengths.
func PackedSize(k, v int) int {
	return uvarintLen(uint64(k)) + k + uvarintLen(uint64(v)) + v
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// NextPacked splits the first pair off b: its key and value (sub-slices
// of b, capacity capped) and the rest.
func NextPacked(b []byte) (k, v, rest []byte, err error) {
	k, b, err = packedBytes(b)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("key: %w", err)
	}
	v, b, err = packedBytes(b)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("value of %q: %w", k, err)
	}
	return k, v, b, nil
}

func packedBytes(b []byte) ([]byte, []byte, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, nil, fmt.Errorf("bad length prefix")
	}
	if l > uint64(len(b)-n) {
		return nil, nil, fmt.Errorf("length %d runs past the %d bytes left", l, len(b)-n)
	}
	end := n + int(l)
	return b[n:end:end], b[end:], nil
}

// eachPacked calls fn for every pair of chunk until it returns false, and
// reports whether it went through all.
func eachPacked(chunk []byte, fn func(k, v []byte) bool) (bool, error) {
	for len(chunk) > 0 {
		k, v, rest, err := NextPacked(chunk)
		if err != nil {
			return false, err
		}
		if !fn(k, v) {
			return false, nil
		}
		chunk = rest
	}
	return true, nil
}

// packer packs pairs into chunks of at most limit bytes (0: no limit; a
// chunk holds one pair at least) and sends each chunk once the next pair
// would not fit, and the last one on flush. Every chunk is a new buffer:
// the receiver keeps it.
type packer struct {
	limit int
	chunk []byte
	send  func(chunk []byte) error
	// full: a chunk filled up to limit, so the next ones are made at
	// limit at once. Growing each 1 MiB chunk from 256 KiB copied it
	// twice, a third of a bulk move's old-owner CPU on borg.
	full bool
}

func (p *packer) add(k, v []byte) error {
	need := PackedSize(len(k), len(v))
	if len(p.chunk) > 0 && p.limit > 0 && len(p.chunk)+need > p.limit {
		p.full = true
		if err := p.flush(); err != nil {
			return err
		}
	}
	if p.chunk == nil {
		size := 256 << 10
		if p.limit > 0 {
			size = min(size, p.limit)
			if p.full {
				size = p.limit
			}
		}
		p.chunk = make([]byte, 0, max(size, need))
	}
	p.chunk = AppendPacked(p.chunk, k, v)
	return nil
}

func (p *packer) flush() error {
	if len(p.chunk) == 0 {
		return nil
	}
	c := p.chunk
	p.chunk = nil
	if cap(c) > 2*len(c)+4<<10 {
		// The last chunk of a move made at limit: the receiver may keep
		// it (its entries share the buffer), so not its spare room.
		c = append(make([]byte, 0, len(c)), c...)
	}
	return p.send(c)
}
