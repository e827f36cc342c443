package wire

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// FrameBufs recycles the buffers frames are encoded into for the exchange
// (its codec's Marshal); gRPC hands each back once it wrote the message.
var FrameBufs FrameBufPool

// FrameBufPool is a mem.BufferPool of power-of-two buffers that, unlike
// gRPC's default pool, does not zero a buffer it hands out: the encoder
// overwrites every byte of the length it asked for, and clearing each
// buffer was a visible share of a worker's CPU.
type FrameBufPool struct {
	classes [maxFrameBufClass + 1]sync.Pool // of *[]byte with cap 1<<class
}

const (
	minFrameBufClass = 10 // 1 KB
	maxFrameBufClass = 26 // 64 MB, the exchange's largest message
)

var _ mem.BufferPool = (*FrameBufPool)(nil)

// Get returns a buffer of length n; its contents are unspecified.
func (p *FrameBufPool) Get(n int) *[]byte {
	c := max(bits.Len(uint(max(n, 1)-1)), minFrameBufClass)
	if c > maxFrameBufClass {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<c)
	return &b
}

// Put takes back a buffer Get returned (or a prefix of it).
func (p *FrameBufPool) Put(b *[]byte) {
	c := bits.Len(uint(cap(*b))) - 1
	if c < minFrameBufClass || c > maxFrameBufClass || cap(*b) != 1<<c {
		return
	}
	*b = (*b)[:0]
	p.classes[c].Put(b)
}
