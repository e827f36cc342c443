package traces

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries"
)

// errMalformed marks input a query skips and counts instead of failing.
var errMalformed = errors.New("malformed record")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// skipCounter counts and logs (rate-limited) skipped records.
type skipCounter struct {
	what      string
	log       *slog.Logger
	processed atomic.Uint64
	malformed atomic.Uint64
	told      time.Time
}

func newSkipCounter(ctx dataplane.OperatorContext, what string) skipCounter {
	log := ctx.Logger
	if log == nil {
		log = slog.Default()
	}
	return skipCounter{what: what, log: log}
}

func (c *skipCounter) skip(r dataplane.Record, err error) {
	n := c.malformed.Add(1)
	if now := time.Now(); now.Sub(c.told) >= 10*time.Second {
		c.log.Warn("skipping malformed "+c.what+" records", "total", n, "partition", r.Partition, "offset", r.Offset, "err", err)
		c.told = now
	}
}

// Counters reports what the operator processed and skipped.
func (c *skipCounter) Counters() map[string]uint64 {
	return map[string]uint64{"processed_records": c.processed.Load(), "malformed_records": c.malformed.Load()}
}

// handle runs fn for r, counting r as processed or, for malformed input,
// skipped; other errors fail the task.
func (c *skipCounter) handle(r dataplane.Record, fn func() error) error {
	if err := fn(); err != nil {
		if errors.Is(err, errMalformed) {
			c.skip(r, err)
			return nil
		}
		return err
	}
	c.processed.Add(1)
	return nil
}

// keyedOp is a keyed stateful operator that counts malformed input.
type keyedOp struct {
	skipCounter
	states []string
	fn     func(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error
}

func (o *keyedOp) StateNames() []string { return o.states }

func (o *keyedOp) ProcessBatch([]dataplane.Record, dataplane.Emit) error {
	return fmt.Errorf("%s: called without keyed state (its input must be keyed)", o.what)
}

func (o *keyedOp) ProcessKeyed(in []dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
	for _, r := range in {
		if err := o.handle(r, func() error { return o.fn(r, st, emit) }); err != nil {
			return err
		}
	}
	return nil
}

// keyed builds the factory of a keyed stateful operator; newFn is called
// once per task with the task's context.
func keyed(what string, states []string, newFn func(ctx dataplane.OperatorContext) (func(dataplane.Record, *dataplane.State, dataplane.Emit) error, error)) dataplane.OperatorFactory {
	return func(ctx dataplane.OperatorContext) (dataplane.Operator, error) {
		fn, err := newFn(ctx)
		if err != nil {
			return nil, err
		}
		return &keyedOp{skipCounter: newSkipCounter(ctx, what), states: states, fn: fn}, nil
	}
}

// statelessOp is a stateless operator that counts malformed input.
type statelessOp struct {
	skipCounter
	fn func(r dataplane.Record, emit dataplane.Emit) error
}

func (o *statelessOp) ProcessBatch(in []dataplane.Record, emit dataplane.Emit) error {
	for _, r := range in {
		if err := o.handle(r, func() error { return o.fn(r, emit) }); err != nil {
			return err
		}
	}
	return nil
}

func stateless(what string, fn func(r dataplane.Record, emit dataplane.Emit) error) dataplane.OperatorFactory {
	return func(ctx dataplane.OperatorContext) (dataplane.Operator, error) {
		return &statelessOp{skipCounter: newSkipCounter(ctx, what), fn: fn}, nil
	}
}

// Sink ends a query's stream.
type Sink func(s *dataplane.Stream) *dataplane.QueryBuilder

// CountSink is the sink of the registered queries: the runtime's counting
// sink (the exactness ledger counts records by source offset).
func CountSink(s *dataplane.Stream) *dataplane.QueryBuilder { return s.Sink("sink") }

// RecordSink keeps the output in memory (dataplane.CollectedRecords).
func RecordSink(s *dataplane.Stream) *dataplane.QueryBuilder { return s.RecordSink("sink") }

// Query names, as registered with package queries (the original artifact's
// QueryName values are the same).
const (
	Azure  = "azure"
	Borg   = "borg"
	Taxi   = "taxi"
	Twitch = "twitch"
)

// Build returns trace query q (Azure, Borg, Taxi or Twitch) named name,
// ending in sink.
func Build(q, name string, sink Sink) (*dataplane.QueryBuilder, error) {
	b := dataplane.NewQuery(name)
	src := b.Source("source", 1)
	switch q {
	case Azure:
		buildAzure(b, src, sink)
	case Borg:
		buildBorg(b, src, sink)
	case Taxi:
		buildTaxi(b, src, sink)
	case Twitch:
		buildTwitch(b, src, sink)
	default:
		return nil, fmt.Errorf("trace query %q: known are %s, %s, %s, %s", q, Azure, Borg, Taxi, Twitch)
	}
	return b, nil
}

// unordered says why a trace query's sink output has no per-key order for
// the ledger to check (queries.Query.Unordered); the others keep it.
var unordered = map[string]string{
	Twitch: "userSessions re-keys users' events by stream, so one stream's records from one source partition (several users) reach streamViewers from several userSessions tasks in no fixed order",
}

func init() {
	for _, q := range []string{Azure, Borg, Taxi, Twitch} {
		b, err := Build(q, q, CountSink)
		if err != nil {
			panic(err)
		}
		if err := queries.Register(queries.Query{Name: b.Name(), Description: b.Description(), Operators: b.MustBuild(), Unordered: unordered[q]}); err != nil {
			panic(err)
		}
	}
}

// median is the median of vs (the mean of the two middle values for an
// even count; 0 for none). vs is sorted in place.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	sort.Float64s(vs)
	m := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[m]
	}
	return (vs[m-1] + vs[m]) / 2
}

// mean is the mean of vs summed in order (0 for none).
func mean(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s / float64(len(vs))
}

// maxOf is the largest of vs (0 for none).
func maxOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	m := vs[0]
	for _, v := range vs[1:] {
		m = max(m, v)
	}
	return m
}

// stat renders a statistic in query output: 4 decimals.
func stat(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }

// DefaultDummyFieldSize is the pad of each stream in twitch's
// streamViewers (15 KB).
const DefaultDummyFieldSize = 15360

// maxDummyFieldSize bounds the pad (a state value must stay well below
// the exchange's frame limits).
const maxDummyFieldSize = 1 << 20

// dummyFieldSize reads ParamDummyFieldSize from the job.
func dummyFieldSize(ctx dataplane.OperatorContext) (int, error) {
	return control.IntParam(ctx.Job, control.ParamDummyFieldSize, DefaultDummyFieldSize, 0, maxDummyFieldSize, "bytes")
}

// newPad returns n incompressible bytes, fixed per operator, so padded
// state costs its size in storage and migration.
func newPad(n int, op string) []byte {
	seed := uint64(0)
	for _, c := range op {
		seed = seed*31 + uint64(c)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	pad := make([]byte, n)
	for i := range pad {
		pad[i] = byte(rng.Uint32())
	}
	return pad
}

// pushBounded appends in to the list state of key, keeping the last size
// entries, and returns the kept entries decoded, oldest first, ending in in:
// the window each trace query computes its statistics over. With fill set
// (a warm-up run, see warmUpFill) a key's empty list first gets size−1
// entries fill(0) … fill(size−2), so its window is full after one record.
func pushBounded[T any](st *dataplane.State, state string, key []byte, size int, in T, encode func(T) []byte, decode func([]byte) (T, error), fill func(i int) T) ([]T, error) {
	items := st.GetList(state, key)
	if len(items) == 0 && fill != nil {
		out := make([]T, 0, size)
		items = make([][]byte, 0, size)
		for i := range size - 1 {
			x := fill(i)
			out, items = append(out, x), append(items, encode(x))
		}
		st.SetList(state, key, append(items, encode(in)))
		return append(out, in), nil
	}
	if len(items) >= size {
		items = items[len(items)-size+1:]
	}
	out := make([]T, 0, len(items)+1)
	for _, it := range items {
		x, err := decode(it)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	st.SetList(state, key, append(items, encode(in)))
	return append(out, in), nil
}

// warmUpFill reports whether the job is a warm-up run (job parameter
// IsWarmUp): its list operators then fill each new key's window at the
// key's first record, as the artifact's *_warmup dataflows do, so a
// warm-up of N one-record keys builds N full windows of state.
func warmUpFill(ctx dataplane.OperatorContext) bool {
	return ctx.Job.Params[control.ParamIsWarmUp] == "true"
}

// fillerRand draws the i-th filler entry of key: distinct per key and
// entry, so filled state costs its size on disk and in migration.
func fillerRand(key []byte, i int) *rand.Rand {
	h := uint64(14695981039346656037)
	for _, c := range key {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return rand.New(rand.NewPCG(h, uint64(i)))
}
