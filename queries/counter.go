package queries

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"koala/dataplane"
	"koala/dataplane/control"
)

// KindKeyedCounter counts records per key in value state "count" and emits
// (key, running count), keeping the input record's identity.
const KindKeyedCounter = "keyed-counter"

// MaxCounterPad bounds ParamCounterPad: a state value must stay well below
// the exchange's message limit when a fetch carries a batch of them.
const MaxCounterPad = 1 << 20

// keyedCounter is the smallest stateful operator: an 8-byte count per key,
// plus pad bytes when ParamCounterPad asks for them.
type keyedCounter struct{ pad int }

func newKeyedCounter(ctx dataplane.OperatorContext) (dataplane.Operator, error) {
	n, err := control.IntParam(ctx.Job, control.ParamDummyFieldSize, 0, 0, MaxCounterPad, "bytes")
	if err != nil {
		return nil, fmt.Errorf("operator %s: %w", ctx.Spec.Name, err)
	}
	return keyedCounter{pad: n}, nil
}

func (keyedCounter) StateNames() []string { return []string{"count"} }

func (keyedCounter) ProcessBatch([]dataplane.Record, dataplane.Emit) error { return nil }

func (c keyedCounter) ProcessKeyed(in []dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
	for _, r := range in {
		old := st.Get("count", r.Key)
		var n uint64
		if len(old) >= 8 {
			n = binary.LittleEndian.Uint64(old)
		}
		n++
		v := make([]byte, 8+c.pad)
		binary.LittleEndian.PutUint64(v, n)
		if c.pad == 0 {
			st.Put("count", r.Key, v)
			r.Value = v
			emit(r)
			continue
		}
		if len(old) == len(v) {
			copy(v[8:], old[8:]) // the key's pad, made when it was first seen
		} else {
			fillCounterPad(v[8:], r.Key)
		}
		st.Put("count", r.Key, v)
		// The output is the count alone; it does not hold on to the pad.
		r.Value = binary.LittleEndian.AppendUint64(make([]byte, 0, 8), n)
		emit(r)
	}
	return nil
}

// fillCounterPad fills pad with pseudo-random bytes derived from key:
// deterministic, and incompressible so the pad costs its size in the store
// and in migration.
func fillCounterPad(pad, key []byte) {
	h := fnv.New64a()
	_, _ = h.Write(key)
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x6a09e667f3bcc908))
	var w [8]byte
	for i := 0; i < len(pad); i += 8 {
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(pad[i:], w[:])
	}
}

func init() {
	dataplane.MustRegisterOperator(KindKeyedCounter, newKeyedCounter)
	if err := Register(Query{
		Name:        "counter",
		Description: "src -> counter -> sink: a keyed count per key in Pebble state (DummyFieldSize pads each state value); the sink keeps the latest count per key",
		Operators: []control.OperatorSpec{
			{Name: "source", Kind: control.KindKafkaSource, Parallelism: 1},
			{Name: "counter", Kind: KindKeyedCounter, Parallelism: 2, Inputs: []string{"source"}, Keyed: true, Stateful: true},
			{Name: "sink", Kind: control.KindCollectSink, Parallelism: 1, Inputs: []string{"counter"}},
		},
	}); err != nil {
		panic(err)
	}
}
