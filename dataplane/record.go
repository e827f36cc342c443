// Package dataplane owns the worker runtime: tasks and their lifecycle, the
// operator API, batching, keyed routing, the record exchange between workers
// over gRPC, the Kafka source, sinks, the input producer, control-signal
// handling over NATS and per-task metric emission.
//
// It also owns per-task state snapshots (snapshot.go): a stateful task's
// Pebble checkpoint, bucket ownership and key lookup table, saved from a
// running task as a consistent cut and restored into a task that is about
// to start. Warm-up state uses them today; they are the per-task primitive
// a checkpoint/recovery feature reuses (snapshot every task at an aligned
// barrier, restore into replacement tasks of the same shape).
//
// Aligned checkpoints (checkpoint_barrier.go, checkpoint_store.go,
// checkpoint_restore.go) make a job's state and its sink ledgers exactly
// once across the loss of a worker. Output written to Kafka is exactly once
// too, for read_committed consumers, when the job takes checkpoints: the
// Kafka sink then writes in transactions committed only once the
// checkpoint covering them has completed (checkpoint_commit.go,
// sink_kafka_txn.go). The cost is latency: a record becomes visible only
// after the next checkpoint's barrier reached the sink and that checkpoint
// completed, on average half a checkpoint interval plus the checkpoint's
// duration, at most one interval plus it; the sink holds the records that
// arrive meanwhile in memory. Without checkpoints the Kafka sink writes at
// once and is at least once.
package dataplane

import (
	"context"
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
	// owner: record keys are user keys, values the owning task id.
	FrameKLT FrameKind = 4
	// FrameKLTEnd closes one old owner's handoff to a new owner.
	FrameKLTEnd FrameKind = 5
	// FrameRouteBarrier follows the last record an upstream task routed
	// with the previous routing table; it is aligned but not forwarded.
	FrameRouteBarrier FrameKind = 6
	// FrameWatermark carries an event-time watermark in Records[0].EventTime
	// (Records[0].Offset 1 = the sender is idle); see watermark.go.
	FrameWatermark FrameKind = 7

	// FrameRouteDrained: an old owner tells a new owner, behind the records
	// it forwarded, which upstream tasks' route barriers it has seen
	// (route_drain.go).
	FrameRouteDrained FrameKind = 8

	// FrameCheckpoint is an aligned checkpoint barrier (BarrierID is the
	// checkpoint id); see checkpoint_barrier.go.
	FrameCheckpoint FrameKind = 9

	// FrameKLTAck: a new owner tells an old owner it installed the lookup
	// entries the old owner handed to it (handoff_ack.go).
	FrameKLTAck FrameKind = 10

	lastWireKind = FrameKLTAck
	// frameControl runs a function on the task goroutine; never on the wire.
	frameControl FrameKind = 100
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
	case frameControl:
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
	Records   []Record

	// ctl is set on frameControl frames only.
	ctl *controlItem
	// pooled: Records came from recordPool (DecodeFrame); release returns it.
	pooled bool
}

// recordPool recycles the record arrays of decoded frames: a 1000-record
// batch needs 72 KB of Record headers, the bulk of what decoding
// allocates. Keys and values alias the frame's data, not the array, so an
// array can be reused as soon as the batch is processed.
var recordPool sync.Pool // of *[]Record

// release hands f's record array back for reuse by a later DecodeFrame.
// Only the task that processed f may call it, after processing: nothing may
// reference f.Records (operators do not keep their input slice; emitted
// records are copied by value) and f must not be used again.
func (f *Frame) release() {
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

// outputRecords returns an empty record array for an output frame that
// will take about n records: a pooled one when n is large enough to be
// worth it (pooled reports which), so steady traffic reuses the arrays of
// frames that receivers released instead of growing a new one per frame.
func outputRecords(n int) (recs []Record, pooled bool) {
	if n < minPooledOutput {
		return nil, false
	}
	if p, ok := recordPool.Get().(*[]Record); ok && cap(*p) >= n {
		return (*p)[:0], true
	}
	return make([]Record, 0, max(n, 1024)), true
}

// controlItem is work a control request needs done on a task goroutine, so
// it is ordered with the records the task processes and emits.
type controlItem struct {
	fn    func(ctx context.Context, t *task) error
	reply chan error
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
	buf = appendString(buf, f.JobID)
	buf = appendString(buf, f.FromTask)
	buf = appendString(buf, f.ToTask)
	buf = appendString(buf, f.BarrierID)
	buf = binary.AppendUvarint(buf, uint64(len(f.Records)))
	for i := range f.Records {
		r := &f.Records[i]
		buf = appendBytes(buf, r.Key)
		buf = appendBytes(buf, r.Value)
		buf = binary.AppendVarint(buf, r.EventTime)
		buf = binary.AppendVarint(buf, int64(r.Partition))
		buf = binary.AppendVarint(buf, r.Offset)
	}
	return buf
}

// FrameSize is the exact length of f's encoding by AppendFrame, so an
// encoder can allocate the buffer once.
func FrameSize(f *Frame) int {
	n := 1 + stringSize(f.JobID) + stringSize(f.FromTask) + stringSize(f.ToTask) + stringSize(f.BarrierID) + uvarintSize(uint64(len(f.Records)))
	for i := range f.Records {
		r := &f.Records[i]
		n += stringSize2(len(r.Key)) + stringSize2(len(r.Value)) + varintSize(r.EventTime) + varintSize(int64(r.Partition)) + varintSize(r.Offset)
	}
	return n
}

func stringSize(s string) int { return stringSize2(len(s)) }

func stringSize2(n int) int { return uvarintSize(uint64(n)) + n }

// uvarintSize is the length of binary.AppendUvarint(nil, v).
func uvarintSize(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// varintSize is the length of binary.AppendVarint(nil, v) (zig-zag encoded).
func varintSize(v int64) int { return uvarintSize(uint64(v<<1) ^ uint64(v>>63)) }

// DecodeFrame parses a frame encoded by AppendFrame. Record keys and values
// alias data, so data must not be reused while the frame is alive.
func DecodeFrame(data []byte) (*Frame, error) {
	d := decoder{buf: data}
	f := &Frame{}
	kind := d.byte()
	f.JobID = d.name()
	f.FromTask = d.name()
	f.ToTask = d.name()
	f.BarrierID = d.string()
	n := d.uvarint()
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
		r.Key = d.bytes()
		r.Value = d.bytes()
		r.EventTime = d.varint()
		part := d.varint()
		r.Offset = d.varint()
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

func appendUvarint(buf []byte, v uint64) []byte { return binary.AppendUvarint(buf, v) }

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func appendBytes(buf []byte, b []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	return append(buf, b...)
}

type decoder struct {
	buf []byte
	err error
}

func (d *decoder) byte() byte {
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

func (d *decoder) uvarint() uint64 {
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

func (d *decoder) varint() int64 {
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

func (d *decoder) bytes() []byte {
	n := d.uvarint()
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

func (d *decoder) string() string { return string(d.bytes()) }

// name decodes a string that repeats from frame to frame (job and task ids)
// through the intern table, so steady traffic decodes headers without
// allocating.
func (d *decoder) name() string { return names.intern(d.bytes()) }

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
