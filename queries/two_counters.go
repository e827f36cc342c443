package queries

import (
	"encoding/binary"
	"fmt"

	"koala/dataplane"
	"koala/dataplane/control"
)

// The two-counters query has two keyed stateful operators, so one run can
// rescale both at once (the paper's Fig 13): counter is keyed by the input
// key and group-sum by the key's group.
const (
	// KindGroupingCounter counts records per input key (value state
	// "count") and emits each record re-keyed to its key's group with the
	// key's running count as value.
	KindGroupingCounter = "grouping-counter"
	// KindGroupSum adds the incoming counts per group (value state "sum")
	// and emits (group, running sum).
	KindGroupSum = "group-sum"
)

// GroupOf maps a key to one of 100 groups by its last two bytes ("k0001234"
// → "g34"); keys shorter than two bytes are their own group.
func GroupOf(key []byte) []byte {
	if len(key) < 2 {
		return append([]byte("g"), key...)
	}
	return append([]byte("g"), key[len(key)-2:]...)
}

type groupingCounter struct{}

func (groupingCounter) StateNames() []string { return []string{"count"} }

func (groupingCounter) ProcessBatch([]dataplane.Record, dataplane.Emit) error { return nil }

func (groupingCounter) ProcessKeyed(in []dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
	for _, r := range in {
		n := uint64(1)
		if v := st.Get("count", r.Key); len(v) == 8 {
			n += binary.LittleEndian.Uint64(v)
		}
		v := binary.LittleEndian.AppendUint64(nil, n)
		st.Put("count", r.Key, v)
		// The record keeps its identity, so the sink ledger still sees each
		// input record once.
		r.Key, r.Value = GroupOf(r.Key), v
		emit(r)
	}
	return nil
}

type groupSum struct{}

func (groupSum) StateNames() []string { return []string{"sum"} }

func (groupSum) ProcessBatch([]dataplane.Record, dataplane.Emit) error { return nil }

func (groupSum) ProcessKeyed(in []dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
	for _, r := range in {
		if len(r.Value) != 8 {
			return fmt.Errorf("group-sum: value of group %q has %d bytes, want an 8-byte count", r.Key, len(r.Value))
		}
		sum := binary.LittleEndian.Uint64(r.Value)
		if v := st.Get("sum", r.Key); len(v) == 8 {
			sum += binary.LittleEndian.Uint64(v)
		}
		v := binary.LittleEndian.AppendUint64(nil, sum)
		st.Put("sum", r.Key, v)
		r.Value = v
		emit(r)
	}
	return nil
}

func init() {
	dataplane.MustRegisterOperator(KindGroupingCounter, func(dataplane.OperatorContext) (dataplane.Operator, error) {
		return groupingCounter{}, nil
	})
	dataplane.MustRegisterOperator(KindGroupSum, func(dataplane.OperatorContext) (dataplane.Operator, error) {
		return groupSum{}, nil
	})
	// Both operators emit every input record once with its identity, so the
	// sink ledger checks the run (Unchecked stays empty).
	if err := Register(Query{
		Name:        "two-counters",
		Unordered:   "a group's records reach group-sum from several counter tasks (the counter is keyed by the input key), so they have no order to keep",
		Description: "src -> counter (by key) -> groupsum (by the key's group, 100 groups) -> sink: two keyed stateful operators; the sink keeps the latest sum per group",
		Operators: []control.OperatorSpec{
			{Name: "source", Kind: control.KindKafkaSource, Parallelism: 1},
			{Name: "counter", Kind: KindGroupingCounter, Parallelism: 2, Inputs: []string{"source"}, Keyed: true, Stateful: true},
			{Name: "groupsum", Kind: KindGroupSum, Parallelism: 2, Inputs: []string{"counter"}, Keyed: true, Stateful: true},
			{Name: "sink", Kind: control.KindCollectSink, Parallelism: 1, Inputs: []string{"groupsum"}},
		},
	}); err != nil {
		panic(err)
	}
}
