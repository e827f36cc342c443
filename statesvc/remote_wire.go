package statesvc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// Wire format of the remote state service ("koala.State" over gRPC), in
// koala's own binary layout so no generated protobuf code is needed (as for
// the data-plane exchange). Every message starts with a one-byte tag; byte
// strings that may be nil are written as uvarint(len+1) then the bytes, with
// 0 meaning nil, so nil (absent / unbounded / delete) and empty stay distinct.
//
//	getReq    'G' | uvarint n | n × bytes
//	getResp   'g' | uvarint n | n × bytes          (nil = absent)
//	putReq    'P' | uvarint n | n × (bytes key | bytes value)   (nil value = delete)
//	scanReq   'S' | bytes start | bytes end | uvarint limit | uvarint maxBytes
//	scanResp  's' | uvarint n | n × (bytes key | bytes value) | bytes next  (nil = range done)
//	rangeReq  'D' | bytes start | bytes end
//	sizeReq   'Z'
//	sizeResp  'z' | uvarint size
//	emptyResp 'E'

const (
	stateService = "koala.State"

	methodMultiGet    = "/koala.State/MultiGet"
	methodMultiPut    = "/koala.State/MultiPut"
	methodScan        = "/koala.State/Scan"
	methodDeleteRange = "/koala.State/DeleteRange"
	methodSize        = "/koala.State/Size"

	// maxStateMessageBytes bounds one message. A MultiPut is one atomic batch
	// and is never split, so the bound is generous.
	maxStateMessageBytes = 256 << 20
)

type getReq struct{ keys [][]byte }
type getResp struct{ vals [][]byte }
type putReq struct{ kvs []KV }
type scanReq struct {
	start, end []byte
	limit      int
	maxBytes   int
}
type scanResp struct {
	keys, vals [][]byte
	next       []byte
}
type rangeReq struct{ start, end []byte }
type sizeReq struct{}
type sizeResp struct{ size uint64 }
type emptyResp struct{}

// stateCodec implements encoding.CodecV2 so Unmarshal gets the raw buffers:
// it materializes them into one fresh slice and decoded byte strings alias
// it (capped, so appends by their owner cannot spill into a neighbour).
type stateCodec struct{}

func (stateCodec) Name() string { return "koala-state" }

func (stateCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := marshalState(v)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (stateCodec) Unmarshal(data mem.BufferSlice, v any) error {
	// Materialize always copies into a new slice: safe to alias.
	return unmarshalState(data.Materialize(), v)
}

var _ encoding.CodecV2 = stateCodec{}

func optLen(b []byte) int {
	if b == nil {
		return binary.MaxVarintLen64
	}
	return binary.MaxVarintLen64 + len(b)
}

func appendOpt(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

func marshalState(v any) ([]byte, error) {
	switch m := v.(type) {
	case *getReq:
		n := 1 + binary.MaxVarintLen64
		for _, k := range m.keys {
			n += optLen(k)
		}
		b := append(make([]byte, 0, n), 'G')
		b = binary.AppendUvarint(b, uint64(len(m.keys)))
		for _, k := range m.keys {
			if k == nil {
				k = []byte{} // keys are never nil on the wire
			}
			b = appendOpt(b, k)
		}
		return b, nil
	case *getResp:
		n := 1 + binary.MaxVarintLen64
		for _, v := range m.vals {
			n += optLen(v)
		}
		b := append(make([]byte, 0, n), 'g')
		b = binary.AppendUvarint(b, uint64(len(m.vals)))
		for _, v := range m.vals {
			b = appendOpt(b, v)
		}
		return b, nil
	case *putReq:
		n := 1 + binary.MaxVarintLen64
		for _, kv := range m.kvs {
			n += optLen(kv.Key) + optLen(kv.Value)
		}
		b := append(make([]byte, 0, n), 'P')
		b = binary.AppendUvarint(b, uint64(len(m.kvs)))
		for _, kv := range m.kvs {
			if kv.Key == nil {
				kv.Key = []byte{} // keys are never nil on the wire
			}
			b = appendOpt(b, kv.Key)
			b = appendOpt(b, kv.Value)
		}
		return b, nil
	case *scanReq:
		b := make([]byte, 0, 1+optLen(m.start)+optLen(m.end)+2*binary.MaxVarintLen64)
		b = append(b, 'S')
		b = appendOpt(b, m.start)
		b = appendOpt(b, m.end)
		b = binary.AppendUvarint(b, uint64(m.limit))
		return binary.AppendUvarint(b, uint64(m.maxBytes)), nil
	case *scanResp:
		n := 1 + binary.MaxVarintLen64 + optLen(m.next)
		for i := range m.keys {
			n += optLen(m.keys[i]) + optLen(m.vals[i])
		}
		b := append(make([]byte, 0, n), 's')
		b = binary.AppendUvarint(b, uint64(len(m.keys)))
		for i := range m.keys {
			b = appendOpt(b, m.keys[i])
			b = appendOpt(b, m.vals[i])
		}
		return appendOpt(b, m.next), nil
	case *rangeReq:
		b := append(make([]byte, 0, 1+optLen(m.start)+optLen(m.end)), 'D')
		b = appendOpt(b, m.start)
		return appendOpt(b, m.end), nil
	case *sizeReq:
		return []byte{'Z'}, nil
	case *sizeResp:
		return binary.AppendUvarint([]byte{'z'}, m.size), nil
	case *emptyResp:
		return []byte{'E'}, nil
	}
	return nil, fmt.Errorf("koala-state codec: cannot marshal %T", v)
}

var errShort = errors.New("truncated message")

// wireReader decodes a message; the first error sticks.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) opt() []byte {
	l := r.uvarint()
	if r.err != nil || l == 0 {
		return nil
	}
	l--
	if l > uint64(len(r.b)) {
		r.err = errShort
		return nil
	}
	out := r.b[:l:l]
	r.b = r.b[l:]
	return out
}

// count reads a list length and checks it against the bytes left (each item
// takes at least min bytes), so a corrupt length cannot force a huge allocation.
func (r *wireReader) count(min int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)/min) {
		r.err = fmt.Errorf("list of %d items in %d bytes", n, len(r.b))
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func unmarshalState(data []byte, v any) error {
	var tag byte
	switch v.(type) {
	case *getReq:
		tag = 'G'
	case *getResp:
		tag = 'g'
	case *putReq:
		tag = 'P'
	case *scanReq:
		tag = 'S'
	case *scanResp:
		tag = 's'
	case *rangeReq:
		tag = 'D'
	case *sizeReq:
		tag = 'Z'
	case *sizeResp:
		tag = 'z'
	case *emptyResp:
		tag = 'E'
	default:
		return fmt.Errorf("koala-state codec: cannot unmarshal into %T", v)
	}
	if len(data) == 0 || data[0] != tag {
		got := "empty message"
		if len(data) > 0 {
			got = fmt.Sprintf("tag %q", data[0])
		}
		return fmt.Errorf("koala-state codec: want message %q for %T, got %s", tag, v, got)
	}
	r := &wireReader{b: data[1:]}
	switch m := v.(type) {
	case *getReq:
		n := r.count(1)
		m.keys = make([][]byte, n)
		for i := range m.keys {
			m.keys[i] = r.opt()
		}
	case *getResp:
		n := r.count(1)
		m.vals = make([][]byte, n)
		for i := range m.vals {
			m.vals[i] = r.opt()
		}
	case *putReq:
		n := r.count(2)
		m.kvs = make([]KV, n)
		for i := range m.kvs {
			m.kvs[i].Key = r.opt()
			m.kvs[i].Value = r.opt()
		}
	case *scanReq:
		m.start = r.opt()
		m.end = r.opt()
		m.limit = int(min(r.uvarint(), 1<<31))
		m.maxBytes = int(min(r.uvarint(), 1<<31))
	case *scanResp:
		n := r.count(2)
		m.keys = make([][]byte, n)
		m.vals = make([][]byte, n)
		for i := 0; i < n; i++ {
			m.keys[i] = r.opt()
			m.vals[i] = r.opt()
		}
		m.next = r.opt()
	case *rangeReq:
		m.start = r.opt()
		m.end = r.opt()
	case *sizeResp:
		m.size = r.uvarint()
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("koala-state codec: decode %T: %w", v, r.err)
	}
	return nil
}
