package dataplane_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"koala/dataplane"
)

// A complete query in a few lines: parse, re-key, count per key in 10 s
// event-time windows, sink. Build registers the operator kinds; pass the
// operators to queries.Register to make the query runnable by name.
func ExampleNewQuery() {
	q := dataplane.NewQuery("clicks").Describe("clicks per page in 10 s windows")
	pages := q.Source("source", 2).
		Filter("valid", func(r dataplane.Record) bool { return len(r.Value) > 0 }).
		Map("by-page", func(r dataplane.Record) dataplane.Record {
			r.Key = r.Value // re-key: the next operator is partitioned by page
			return r
		}).Parallelism(4)
	pages.Window("per-page", dataplane.Tumbling(10*time.Second),
		func() dataplane.Aggregator { return dataplane.CountAggregator{} }).Parallelism(4).
		CollectSink("sink")

	ops, err := q.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range ops {
		fmt.Printf("%-8s %-20s x%d inputs=%v stateful=%v\n", op.Name, op.Kind, op.Parallelism, op.Inputs, op.Stateful)
	}
	// Output:
	// source   kafka-source         x2 inputs=[] stateful=false
	// valid    clicks.valid         x1 inputs=[source] stateful=false
	// by-page  clicks.by-page       x4 inputs=[valid] stateful=false
	// per-page clicks.per-page      x4 inputs=[by-page] stateful=true
	// sink     collect-sink         x1 inputs=[per-page] stateful=false
}

// Keyed state: a running count per key in value state, the last three
// values per key in list state.
func ExampleStream_KeyedStateful() {
	q := dataplane.NewQuery("recent")
	q.Source("source", 1).
		KeyedStateful("recent", []string{"count", "last3"}, func(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
			var n uint64
			if v := st.Get("count", r.Key); len(v) == 8 {
				n = binary.LittleEndian.Uint64(v)
			}
			st.Put("count", r.Key, binary.LittleEndian.AppendUint64(nil, n+1))
			last := append(st.GetList("last3", r.Key), r.Value)
			st.SetList("last3", r.Key, last[max(0, len(last)-3):])
			emit(r)
			return nil
		}).
		Sink("sink")
	ops, _ := q.Build()
	fmt.Println(ops[1].Name, "keyed:", ops[1].Keyed, "stateful:", ops[1].Stateful)
	// Output: recent keyed: true stateful: true
}

// Two inputs joined by key: people ⋈ orders, each keyed by person id by
// the operator before the join. A JoinSpec.Window makes it a windowed join.
func ExampleStream_Join() {
	q := dataplane.NewQuery("orders")
	src := q.Source("source", 1)
	people := src.Filter("people", func(r dataplane.Record) bool { return strings.HasPrefix(string(r.Value), "person:") })
	orders := src.Filter("orders", func(r dataplane.Record) bool { return strings.HasPrefix(string(r.Value), "order:") })
	people.Join("enrich", orders, dataplane.JoinSpec{
		Window: time.Minute,
		Join: func(key []byte, person, order dataplane.Record) (dataplane.Record, bool) {
			return dataplane.Record{Key: key, Value: append(append(person.Value, ' '), order.Value...)}, true
		},
	}).RecordSink("sink")
	ops, _ := q.Build()
	fmt.Println(ops[3].Name, ops[3].Inputs)
	// Output: enrich [people orders]
}

// Sliding windows: a record belongs to Size/Slide windows.
func ExampleWindowSpec_WindowStarts() {
	spec := dataplane.Sliding(10*time.Second, 5*time.Second)
	for _, start := range spec.WindowStarts(int64(12 * time.Second)) {
		fmt.Printf("[%v, %v) ", time.Duration(start), time.Duration(start)+spec.Size)
	}
	fmt.Println()
	// Output: [10s, 20s) [5s, 15s)
}

// An incremental aggregator: the accumulator is bytes, so it lives in
// keyed state and migrates with its key.
type maxValue struct{}

func (maxValue) Zero() []byte { return make([]byte, 8) }
func (maxValue) Add(acc []byte, r dataplane.Record) []byte {
	if v := binary.LittleEndian.Uint64(r.Value); v > binary.LittleEndian.Uint64(acc) {
		binary.LittleEndian.PutUint64(acc, v)
	}
	return acc
}
func (maxValue) Result(key []byte, end int64, acc []byte) dataplane.Record {
	return dataplane.Record{Key: dataplane.WindowResultKey(key, end), Value: acc}
}

func ExampleAggregator() {
	var agg dataplane.Aggregator = maxValue{}
	acc := agg.Zero()
	for _, v := range []uint64{3, 9, 4} {
		acc = agg.Add(acc, dataplane.Record{Value: binary.LittleEndian.AppendUint64(nil, v)})
	}
	out := agg.Result([]byte("sensor-1"), int64(60*time.Second), acc)
	fmt.Println(string(out.Key), binary.LittleEndian.Uint64(out.Value))
	// Output: sensor-1@60000 9
}

// List state values are length-prefixed items in one value per key.
func ExampleEncodeList() {
	v := dataplane.EncodeList([][]byte{[]byte("a"), []byte("bc")})
	items, _ := dataplane.DecodeList(v)
	fmt.Printf("%q %q\n", v, items)
	// Output: "\x01a\x02bc" ["a" "bc"]
}
