package queries

import (
	"encoding/binary"

	"koala/dataplane"
	"koala/dataplane/control"
)

// KindKeyedCounter counts records per key in value state "count" and emits
// (key, running count), keeping the input record's identity.
const KindKeyedCounter = "keyed-counter"

// keyedCounter is the smallest stateful operator: one 8-byte value per key.
type keyedCounter struct{}

func (keyedCounter) StateNames() []string { return []string{"count"} }

func (keyedCounter) ProcessBatch([]dataplane.Record, dataplane.Emit) error { return nil }

func (keyedCounter) ProcessKeyed(in []dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
	for _, r := range in {
		var n uint64
		if v := st.Get("count", r.Key); len(v) == 8 {
			n = binary.LittleEndian.Uint64(v)
		}
		n++
		v := make([]byte, 8)
		binary.LittleEndian.PutUint64(v, n)
		st.Put("count", r.Key, v)
		r.Value = v
		emit(r)
	}
	return nil
}

func init() {
	dataplane.MustRegisterOperator(KindKeyedCounter, func(dataplane.OperatorContext) (dataplane.Operator, error) {
		return keyedCounter{}, nil
	})
	if err := Register(Query{
		Name:        "counter",
		Description: "src -> counter -> sink: a keyed count per key in Pebble state; the sink keeps the latest count per key",
		Operators: []control.OperatorSpec{
			{Name: "source", Kind: dataplane.KindKafkaSource, Parallelism: 1},
			{Name: "counter", Kind: KindKeyedCounter, Parallelism: 2, Inputs: []string{"source"}, Keyed: true, Stateful: true},
			{Name: "sink", Kind: dataplane.KindCollectSink, Parallelism: 1, Inputs: []string{"counter"}},
		},
	}); err != nil {
		panic(err)
	}
}
