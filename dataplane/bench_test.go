package dataplane

import (
	"fmt"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// Hot-path benchmarks of the data plane, run by `make bench` (koala bench)
// and by hand with
//
//	go test -run '^$' -bench 'Frame|BucketOf|Outputs' ./dataplane
//
// Every benchmark works on one batch of benchRecords records of about
// benchRecordBytes bytes each (key + value + event time, partition, offset),
// the shape of a source batch, and reports ns/record next to ns/op (one op =
// one batch).

const (
	benchRecords   = 1000
	benchKeyLen    = 16
	benchValueLen  = 80 // + 16-byte key + ~6 bytes of varints ≈ 100 B per record on the wire
	benchBucketsOf = control.DefaultNumBuckets
)

// benchBatch returns benchRecords records with distinct 16-byte keys and
// 80-byte values, as the producer generates them.
func benchBatch() []Record {
	recs := make([]Record, benchRecords)
	val := make([]byte, benchValueLen)
	for i := range val {
		val[i] = 'a' + byte(i%26)
	}
	for i := range recs {
		key := make([]byte, benchKeyLen)
		copy(key, fmt.Sprintf("key-%011d", uint64(i)*2654435761%10_000_000))
		recs[i] = Record{Key: key, Value: val, EventTime: 1_764_000_000_000_000_000 + int64(i)*1000, Partition: int32(i % 4), Offset: 1_000_000 + int64(i)}
	}
	return recs
}

func benchFrame() *wire.Frame {
	return &wire.Frame{Kind: wire.FrameData, JobID: "counter-20261129-093019", FromTask: "source-0", ToTask: "counter-1", Records: benchBatch()}
}

func reportPerRecord(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRecords), "ns/record")
}

// BenchmarkFrameEncode encodes one 1000-record data frame into a reused buffer.
func BenchmarkFrameEncode(b *testing.B) {
	f := benchFrame()
	buf := wire.AppendFrame(nil, f)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf = wire.AppendFrame(buf[:0], f)
	}
	reportPerRecord(b)
	b.ReportMetric(float64(len(buf))/benchRecords, "B/record")
}

// BenchmarkFrameDecode decodes one 1000-record data frame (keys and values
// alias the input, as on the gRPC receive path) and releases it, as a task
// does once it has processed the batch, so the record array is reused.
func BenchmarkFrameDecode(b *testing.B) {
	benchDecode(b, true)
}

// BenchmarkFrameDecodeNoRelease is BenchmarkFrameDecode without returning
// record arrays to the pool (a fresh array per frame).
func BenchmarkFrameDecodeNoRelease(b *testing.B) {
	benchDecode(b, false)
}

func benchDecode(b *testing.B, release bool) {
	data := wire.AppendFrame(nil, benchFrame())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := wire.DecodeFrame(data)
		if err != nil || len(f.Records) != benchRecords {
			b.Fatalf("decode: %v", err)
		}
		if release {
			f.Release()
		}
	}
	reportPerRecord(b)
}

// BenchmarkBucketOf routes the 1000 keys of a batch to one of 128 buckets.
func BenchmarkBucketOf(b *testing.B) {
	recs := benchBatch()
	var sink int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range recs {
			sink += statesvc.BucketOf(recs[j].Key, benchBucketsOf)
		}
	}
	reportPerRecord(b)
	if sink < 0 {
		b.Fatal("unreachable")
	}
}

// BenchmarkRouteTarget is keyed routing of one batch: bucket of each
// record's key, then the owning task of that bucket (route.target), to one
// of 4 counter tasks.
func BenchmarkRouteTarget(b *testing.B) {
	recs := benchBatch()
	rt := compileRoute(benchDeployment(4), "counter")
	if rt == nil {
		b.Fatal("no route to counter")
	}
	var sink int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range recs {
			sink += rt.target(&recs[j], 0).Index
		}
	}
	reportPerRecord(b)
	if sink < 0 {
		b.Fatal("unreachable")
	}
}

// benchDeployment is source(1) -> counter(parallel, keyed) with a round-robin
// bucket table.
func benchDeployment(parallel int) control.Deployment {
	job := control.JobSpec{
		JobID: "bench", Query: "counter", NumBuckets: benchBucketsOf, BatchSize: benchRecords,
		Operators: []control.OperatorSpec{
			{Name: "source", Kind: control.KindKafkaSource, Parallelism: 1},
			{Name: "counter", Kind: "keyed-counter", Parallelism: parallel, Inputs: []string{"source"}, Keyed: true, Stateful: true},
		},
	}
	dep := control.Deployment{Job: job, Epoch: 1}
	dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID("source", 0), Operator: "source", WorkerID: "w1"})
	table := control.RoutingTable{Operator: "counter", Epoch: 1, Buckets: make([]int, benchBucketsOf)}
	for i := 0; i < parallel; i++ {
		dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID("counter", i), Operator: "counter", Index: i, WorkerID: fmt.Sprintf("w%d", i%2+1)})
	}
	for bk := range table.Buckets {
		table.Buckets[bk] = bk % parallel
	}
	dep.Routing = []control.RoutingTable{table}
	return dep
}

// BenchmarkOutputsBatching is a source task's output path for one batch:
// route each of 1000 records by key to one of 4 counter tasks and append it to
// that task's pending frame (outputs.begin/emit), then hand the frames off
// the way outputs.flush does, without the network delivery.
func BenchmarkOutputsBatching(b *testing.B) {
	for _, parallel := range []int{2, 4} {
		b.Run(fmt.Sprintf("targets=%d", parallel), func(b *testing.B) {
			view := newTaskView(benchDeployment(parallel), "source")
			if len(view.routes) != 1 {
				b.Fatalf("want 1 route, got %d", len(view.routes))
			}
			recs := benchBatch()
			var o outputs
			sent := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				o.begin(view, 0, "bench", "source-0", len(recs))
				for _, r := range recs {
					o.emit(r)
				}
				for _, id := range o.order { // flush without delivery
					f := o.pending[id]
					sent += len(f.Records)
					f.Release() // as the receiving task does once it processed f
					delete(o.pending, id)
				}
				o.order = o.order[:0]
				o.count = 0
			}
			reportPerRecord(b)
			if sent != b.N*benchRecords {
				b.Fatalf("sent %d records, want %d", sent, b.N*benchRecords)
			}
		})
	}
}

// BenchmarkFrameRoundTrip is encode + decode of one batch, the codec cost of
// one hop of the exchange.
func BenchmarkFrameRoundTrip(b *testing.B) {
	f := benchFrame()
	var buf []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = wire.AppendFrame(buf[:0], f)
		g, err := wire.DecodeFrame(buf)
		if err != nil {
			b.Fatal(err)
		}
		g.Release()
	}
	reportPerRecord(b)
}
