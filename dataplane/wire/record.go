// Package wire owns the records and frames every other part of the data
// plane exchanges: Record, Frame, the frame codec, its decoder and name
// intern table, and the buffer and record-array pools that keep steady
// traffic from allocating. It is the ground the runtime, the exchange and
// the state-fetch codec stand on, so it imports nothing of theirs.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
)

// Record is one event flowing through a job. Partition and Offset identify
// the Kafka record it came from, so sinks can count losses and duplicates.
type Record struct {
	Key       []byte
	Value     []byte
	EventTime int64 // unix nanoseconds
	Partition int32
	Offset    int64
}

// FrameKind says what a frame carries.
type FrameKind uint8

const (
	FrameData    FrameKind = 1 // records
	FrameBarrier FrameKind = 2 // an in-band barrier (drain, reconfiguration)
	FrameEOS     FrameKind = 3 // end of stream: the sender will send nothing more
	// FrameKLT carries key lookup table entries from an old owner to a new
	// owner (runs of key hashes per bucket, each record naming the owner),
	// the state a bulk move pushes, and the moving buckets' timers.
	FrameKLT FrameKind = 4
	// FrameKLTEnd closes one old owner's handoff to a new owner.
	FrameKLTEnd FrameKind = 5
	// FrameRouteBarrier follows the last record an upstream task routed
	// with the previous routing table; it is aligned but not forwarded.
	FrameRouteBarrier FrameKind = 6
	// FrameWatermark carries an event-time watermark in Records[0].EventTime
	// (Records[0].Offset 1 = the sender is idle); see dataplane/watermark.go.
	FrameWatermark FrameKind = 7

	// FrameRouteDrained: an old owner tells a new owner, behind the records
	// it forwarded, which upstream tasks' route barriers it has seen
	// (dataplane/route_drain.go).
	FrameRouteDrained FrameKind = 8

	// FrameCheckpoint is an aligned checkpoint barrier (BarrierID is the
	// checkpoint id); see dataplane/checkpoint_barrier.go.
	FrameCheckpoint FrameKind = 9

	// FrameKLTAck: a new owner tells an old owner it installed the lookup
	// entries the old owner handed to it (dataplane/handoff_ack.go).
	FrameKLTAck FrameKind = 10

	// FrameCredit: a task tells a source task that it processed the
	// source's data frames up to sequence number Seq, so the source may
	// read further (dataplane/source_credit.go); with a BarrierID, a new
	// owner tells a sender to wait or go on (dataplane/route_hold.go). It
	// never waits in an inbox: the receiving worker applies it on arrival.
	FrameCredit FrameKind = 11

	// FrameHandedOff: an old owner tells each downstream task, behind
	// every record it sent before, that it gave buckets away at routing
	// epoch Records[0].Offset (dataplane/downstream_order.go).
	FrameHandedOff FrameKind = 12

	// FrameOrderAfter: a new owner tells each downstream task that what it
	// sends from here on follows the FrameHandedOff of each old owner its
	// records name (Key the old owner, Offset the routing epoch).
	FrameOrderAfter FrameKind = 13

	lastWireKind = FrameOrderAfter
	// FrameControl runs a function on the task goroutine; never on the wire.
	FrameControl FrameKind = 100
)

func (k FrameKind) String() string {
	switch k {
	case FrameData:
		return "data"
	case FrameBarrier:
		return "barrier"
	case FrameEOS:
		return "eos"
	case FrameKLT:
		return "klt"
	case FrameKLTEnd:
		return "klt-end"
	case FrameRouteBarrier:
		return "route-barrier"
	case FrameWatermark:
		return "watermark"
	case FrameRouteDrained:
		return "route-drained"
	case FrameCheckpoint:
		return "checkpoint"
	case FrameKLTAck:
		return "klt-ack"
	case FrameCredit:
		return "credit"
	case FrameHandedOff:
		return "handed-off"
	case FrameOrderAfter:
		return "order-after"
	case FrameControl:
		return "control"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Frame is the unit of exchange between tasks: a batch of records or a
// barrier, from one task to another.
type Frame struct {
	Kind      FrameKind
	JobID     string
	FromTask  string
	ToTask    string
	BarrierID string
	// Seq is a source task's batch number on the data frames it sends
	// (0 on every other frame): the receiver returns it in a FrameCredit
	// once it processed the frame. It is also the credited number there.
	Seq     uint64
	Records []Record

	// Ctl is the work item of a FrameControl frame (never encoded). Its
	// type belongs to the runtime that queues it, so wire keeps it opaque.
	Ctl any
	// pooled: Records came from recordPool (DecodeFrame); release returns it.
	pooled bool
}

// recordPool recycles the record arrays of decoded frames: a 1000-record
// batch needs 72 KB of Record headers, the bulk of what decoding
// allocates. Keys and values alias the frame's data, not the array, so an
// array can be reused as soon as the batch is processed.
var recordPool sync.Pool // of *[]Record

// Release hands f's record array back for reuse by a later DecodeFrame.
// Only the task that processed f may call it, after processing: nothing may
// reference f.Records (operators do not keep their input slice; emitted
// records are copied by value) and f must not be used again.
func (f *Frame) Release() {
	if !f.pooled || cap(f.Records) == 0 {
		return
	}
	recs := f.Records[:cap(f.Records)]
	clear(recs) // drop references to the data so the pool pins no buffers
	f.Records, f.pooled = nil, false
	recordPool.Put(&recs)
}

// pooledRecords returns a record array of length n, reused when possible.
func pooledRecords(n int) []Record {
	if p, ok := recordPool.Get().(*[]Record); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	// Round up so arrays fit batches of slightly different sizes.
	return make([]Record, n, max(n, 1024))
}

// minPooledOutput is the smallest expected output frame whose record
// array comes from recordPool; smaller frames (window results, sparse
// batches) grow a small array of their own.
const minPooledOutput = 64

// ReserveRecords gives f an empty record array for about n output
// records: a pooled one when n is large enough to be worth it, so steady
// traffic reuses the arrays of frames that receivers released instead of
// growing a new one per frame. Receivers release it (Frame.Release).
func (f *Frame) ReserveRecords(n int) {
	if n < minPooledOutput {
		f.Records, f.pooled = nil, false
		return
	}
	if p, ok := recordPool.Get().(*[]Record); ok && cap(*p) >= n {
		f.Records, f.pooled = (*p)[:0], true
		return
	}
	f.Records, f.pooled = make([]Record, 0, max(n, 1024)), true
}

// Limits that protect a worker from malformed or hostile frames.
const (
	MaxFrameRecords = 1 << 20
	MaxFieldBytes   = 16 << 20
)

var errShortFrame = errors.New("frame truncated")

// AppendFrame encodes f after buf. The layout is little-endian and
// length-prefixed; it is the wire format of the gRPC exchange.
func AppendFrame(buf []byte, f *Frame) []byte {
	buf = append(buf, byte(f.Kind))
	buf = AppendString(buf, f.JobID)
	buf = AppendString(buf, f.FromTask)
	buf = AppendString(buf, f.ToTask)
	buf = AppendString(buf, f.BarrierID)
	buf = binary.AppendUvarint(buf, f.Seq)
	buf = binary.AppendUvarint(buf, uint64(len(f.Records)))
	for i := range f.Records {
		r := &f.Records[i]
		buf = AppendBytes(buf, r.Key)
		buf = AppendBytes(buf, r.Value)
		buf = binary.AppendVarint(buf, r.EventTime)
		buf = binary.AppendVarint(buf, int64(r.Partition))
		buf = binary.AppendVarint(buf, r.Offset)
	}
	return buf
}

// FrameSize is the exact length of f's encoding by AppendFrame, so an
// encoder can allocate the buffer once.
func FrameSize(f *Frame) int {
	n := 1 + stringSize(f.JobID) + stringSize(f.FromTask) + stringSize(f.ToTask) + stringSize(f.BarrierID) + UvarintSize(f.Seq) + UvarintSize(uint64(len(f.Records)))
	for i := range f.Records {
		r := &f.Records[i]
		n += stringSize2(len(r.Key)) + stringSize2(len(r.Value)) + varintSize(r.EventTime) + varintSize(int64(r.Partition)) + varintSize(r.Offset)
	}
	return n
}

func stringSize(s string) int { return stringSize2(len(s)) }

func stringSize2(n int) int { return UvarintSize(uint64(n)) + n }

// UvarintSize is the length of binary.AppendUvarint(nil, v).
func UvarintSize(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// varintSize is the length of binary.AppendVarint(nil, v) (zig-zag encoded).
func varintSize(v int64) int { return UvarintSize(uint64(v<<1) ^ uint64(v>>63)) }

// DecodeFrame parses a frame encoded by AppendFrame. Record keys and values
// alias data, so data must not be reused while the frame is alive.
func DecodeFrame(data []byte) (*Frame, error) {
	d := Decoder{buf: data}
	f := &Frame{}
	kind := d.Byte()
	f.JobID = d.Name()
	f.FromTask = d.Name()
	f.ToTask = d.Name()
	f.BarrierID = d.Str()
	f.Seq = d.Uvarint()
	n := d.Uvarint()
	if d.err != nil {
		return nil, fmt.Errorf("decode frame header: %w", d.err)
	}
	f.Kind = FrameKind(kind)
	if f.Kind < FrameData || f.Kind > lastWireKind {
		return nil, fmt.Errorf("decode frame: unknown kind %d (allowed 1..%d)", kind, lastWireKind)
	}
	if n > MaxFrameRecords {
		return nil, fmt.Errorf("decode frame: %d records exceeds the limit of %d", n, MaxFrameRecords)
	}
	// Each record takes at least 5 bytes; refuse counts the data cannot hold.
	if n > uint64(len(data)) {
		return nil, fmt.Errorf("decode frame: record count %d larger than the frame", n)
	}
	if n > 0 {
		f.Records, f.pooled = pooledRecords(int(n)), true
	}
	for i := range f.Records {
		r := &f.Records[i]
		r.Key = d.Bytes()
		r.Value = d.Bytes()
		r.EventTime = d.Varint()
		part := d.Varint()
		r.Offset = d.Varint()
		if d.err != nil {
			return nil, fmt.Errorf("decode frame record %d: %w", i, d.err)
		}
		if part < -1<<31 || part > 1<<31-1 {
			return nil, fmt.Errorf("decode frame record %d: partition %d out of range", i, part)
		}
		r.Partition = int32(part)
	}
	if len(d.buf) != 0 {
		return nil, fmt.Errorf("decode frame: %d trailing bytes", len(d.buf))
	}
	return f, nil
}

// AppendUvarint, AppendString and AppendBytes are the field encodings of
// frames, shared by the other length-prefixed messages of the exchange.
func AppendUvarint(buf []byte, v uint64) []byte { return binary.AppendUvarint(buf, v) }

func AppendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func AppendBytes(buf []byte, b []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	return append(buf, b...)
}

// Decoder reads the fields AppendFrame and its helpers write. The first
// error sticks: later reads return zero values and Err reports it.
type Decoder struct {
	buf []byte
	err error
}

// NewDecoder reads data; decoded bytes alias it.
func NewDecoder(data []byte) Decoder { return Decoder{buf: data} }

// Err is the first decoding error, if any.
func (d *Decoder) Err() error { return d.err }

// Fail records err as the decoding error unless one is already set.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Rest is what has not been read yet.
func (d *Decoder) Rest() []byte { return d.buf }

func (d *Decoder) Byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.buf) < 1 {
		d.err = errShortFrame
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.err = errShortFrame
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *Decoder) Varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.err = errShortFrame
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.err != nil {
		return nil
	}
	if n > MaxFieldBytes {
		d.err = fmt.Errorf("field of %d bytes exceeds the limit of %d", n, MaxFieldBytes)
		return nil
	}
	if uint64(len(d.buf)) < n {
		d.err = errShortFrame
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

func (d *Decoder) Str() string { return string(d.Bytes()) }

// name decodes a string that repeats from frame to frame (job and task ids)
// through the intern table, so steady traffic decodes headers without
// allocating.
func (d *Decoder) Name() string { return names.intern(d.Bytes()) }

// internTable maps byte strings to shared strings. It is bounded: when full
// it starts over, so hostile input cannot grow it without limit.
type internTable struct {
	mu sync.Mutex
	m  map[string]string
}

const maxInterned = 4096

var names internTable

func (t *internTable) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.m[string(b)]; ok { // no allocation for the lookup
		return s
	}
	if t.m == nil || len(t.m) >= maxInterned {
		t.m = make(map[string]string)
	}
	s := string(b)
	t.m[s] = s
	return s
}

// AppendByteSlices encodes a list of optional byte strings: a presence
// byte, then the bytes, so nil and empty stay distinct.
func AppendByteSlices(buf []byte, list [][]byte) []byte {
	buf = AppendUvarint(buf, uint64(len(list)))
	for _, b := range list {
		if b == nil {
			buf = append(buf, 0)
			continue
		}
		buf = append(buf, 1)
		buf = AppendBytes(buf, b)
	}
	return buf
}

// BytesSize is the exact length of b's encoding by AppendBytes.
func BytesSize(b []byte) int { return stringSize2(len(b)) }

// ByteSlicesSize is the exact length of list's encoding by
// AppendByteSlices, so an encoder can allocate its buffer once (a fetch
// reply's megabytes of values, grown by doubling, were copied about twice
// over: after profiling, a tenth of a task's worker that served fetches).
func ByteSlicesSize(list [][]byte) int {
	n := UvarintSize(uint64(len(list)))
	for _, b := range list {
		n++
		if b != nil {
			n += stringSize2(len(b))
		}
	}
	return n
}

// ByteSlices reads a list AppendByteSlices wrote; entries are copies, each
// its own allocation (a reader may keep one without the others).
func (d *Decoder) ByteSlices() [][]byte {
	n := d.Uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)) {
		d.err = fmt.Errorf("list of %d entries larger than the message", n)
		return nil
	}
	out := make([][]byte, n)
	for i := range out {
		if d.Byte() == 1 {
			b := d.Bytes()
			out[i] = append(make([]byte, 0, len(b)), b...) // present, possibly empty
		}
		if d.err != nil {
			return nil
		}
	}
	return out
}
