package wftest

import (
	"encoding/binary"

	"koala/dataplane"
	"koala/queries"
)

// KafkaCounterQuery is the name of a test query that counts records per
// key and writes (key, running count as 8 little-endian bytes) to a Kafka
// topic (control.ParamKafkaSinkTopic). RegisterKafkaCounter registers it.
const KafkaCounterQuery = "test-counter-kafka-sink"

// RegisterKafkaCounter registers KafkaCounterQuery; call it once.
func RegisterKafkaCounter() error {
	q := dataplane.NewQuery(KafkaCounterQuery).
		Source("source", 1).
		KeyedStateful("counter", []string{"count"}, func(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
			var n uint64
			if v := st.Get("count", r.Key); len(v) == 8 {
				n = binary.LittleEndian.Uint64(v)
			}
			v := binary.LittleEndian.AppendUint64(nil, n+1)
			st.Put("count", r.Key, v)
			r.Value = v
			emit(r)
			return nil
		}).Parallelism(2).
		KafkaSink("sink", "")
	ops, err := q.Build()
	if err != nil {
		return err
	}
	return queries.Register(queries.Query{Name: KafkaCounterQuery, Operators: ops})
}
