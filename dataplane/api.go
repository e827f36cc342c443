package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"koala/dataplane/control"
	"koala/statesvc"
)

// Query builder
//
// A query is a dataflow of named operators. QueryBuilder writes the
// []control.OperatorSpec a job runs and registers the operator kinds it
// needs ("<query>.<operator>"), so a query is a few lines:
//
//	ops := dataplane.NewQuery("wordcount").
//		Source("source", 1).
//		Map("split", splitFn).
//		Window("count", dataplane.Tumbling(10*time.Second), countAgg).
//		Sink("sink").
//		MustBuild()
//
// Every operator after the source receives its input partitioned by
// Record.Key (hash of the key → bucket → task), so per-key order holds and
// keyed operators see every record of a key; an operator re-keys the stream
// by setting Key on the records it emits. Parallelism defaults to 1 and is
// set per operator with Stream.Parallelism or, at run time, from the
// config's "<Operator>Parallelism".

// QueryBuilder accumulates the operators of one query.
type QueryBuilder struct {
	name    string
	desc    string
	ops     []control.OperatorSpec
	kinds   map[string]OperatorFactory
	err     error
	mu      sync.Mutex
	built   []control.OperatorSpec
	builtOK bool
}

// Stream is the output of one operator of a query under construction.
type Stream struct {
	q  *QueryBuilder
	op int // index in q.ops
}

// NewQuery starts a query.
func NewQuery(name string) *QueryBuilder {
	q := &QueryBuilder{name: name, kinds: map[string]OperatorFactory{}}
	if name == "" {
		q.fail(errors.New("query name must not be empty"))
	}
	return q
}

// Describe sets the query's one-line description.
func (q *QueryBuilder) Describe(desc string) *QueryBuilder { q.desc = desc; return q }

// Name is the query's name.
func (q *QueryBuilder) Name() string { return q.name }

// Description is the query's description.
func (q *QueryBuilder) Description() string { return q.desc }

func (q *QueryBuilder) fail(err error) {
	if q.err == nil {
		q.err = fmt.Errorf("query %q: %w", q.name, err)
	}
}

// add appends an operator reading from inputs with a factory (nil for the
// runtime's own kinds).
func (q *QueryBuilder) add(spec control.OperatorSpec, f OperatorFactory) *Stream {
	if spec.Name == "" {
		q.fail(errors.New("operator name must not be empty"))
	} else if err := statesvc.CheckName(spec.Name); err != nil {
		q.fail(err)
	}
	for _, op := range q.ops {
		if op.Name == spec.Name {
			q.fail(fmt.Errorf("operator %q declared twice", spec.Name))
		}
	}
	if spec.Parallelism == 0 {
		spec.Parallelism = 1
	}
	if f != nil {
		spec.Kind = q.name + "." + spec.Name
		q.kinds[spec.Kind] = f
	}
	q.ops = append(q.ops, spec)
	return &Stream{q: q, op: len(q.ops) - 1}
}

// Source reads the job's Kafka topic with parallelism tasks (partition p
// goes to task p mod parallelism). Records carry the Kafka key, value and
// timestamp (as event time).
func (q *QueryBuilder) Source(name string, parallelism int) *Stream {
	if parallelism < 1 {
		q.fail(fmt.Errorf("source %q: parallelism %d must be ≥ 1", name, parallelism))
	}
	return q.add(control.OperatorSpec{Name: name, Kind: control.KindKafkaSource, Parallelism: parallelism}, nil)
}

// Name is the name of the operator producing the stream.
func (s *Stream) Name() string { return s.q.ops[s.op].Name }

// Parallelism sets the number of tasks of the operator producing s.
func (s *Stream) Parallelism(n int) *Stream {
	if n < 1 {
		s.q.fail(fmt.Errorf("operator %q: parallelism %d must be ≥ 1", s.Name(), n))
	}
	s.q.ops[s.op].Parallelism = n
	return s
}

func (s *Stream) then(name string, f OperatorFactory, stateful bool) *Stream {
	return s.q.add(control.OperatorSpec{Name: name, Inputs: []string{s.Name()}, Keyed: true, Stateful: stateful}, f)
}

// Map replaces each record by fn's result.
func (s *Stream) Map(name string, fn func(Record) Record) *Stream {
	if fn == nil {
		s.q.fail(fmt.Errorf("map %q: function is nil", name))
	}
	return s.then(name, Stateless(func(in []Record, emit Emit) error {
		for _, r := range in {
			emit(fn(r))
		}
		return nil
	}), false)
}

// Filter keeps the records fn accepts.
func (s *Stream) Filter(name string, fn func(Record) bool) *Stream {
	if fn == nil {
		s.q.fail(fmt.Errorf("filter %q: function is nil", name))
	}
	return s.then(name, Stateless(func(in []Record, emit Emit) error {
		for _, r := range in {
			if fn(r) {
				emit(r)
			}
		}
		return nil
	}), false)
}

// FlatMap emits any number of records per input record. An error fails the
// task; count and skip bad input instead where it can occur.
func (s *Stream) FlatMap(name string, fn func(r Record, emit Emit) error) *Stream {
	if fn == nil {
		s.q.fail(fmt.Errorf("flatmap %q: function is nil", name))
	}
	return s.then(name, Stateless(func(in []Record, emit Emit) error {
		for _, r := range in {
			if err := fn(r, emit); err != nil {
				return err
			}
		}
		return nil
	}), false)
}

// Process adds an operator built by factory (an Operator, a
// StatefulOperator, optionally a WatermarkOperator).
func (s *Stream) Process(name string, factory OperatorFactory, stateful bool) *Stream {
	if factory == nil {
		s.q.fail(fmt.Errorf("operator %q: factory is nil", name))
	}
	return s.then(name, factory, stateful)
}

// KeyedStateful runs fn per record with the named value or list states of
// the record's key (loaded per batch, migrated with the key).
func (s *Stream) KeyedStateful(name string, states []string, fn func(r Record, st *State, emit Emit) error) *Stream {
	if fn == nil || len(states) == 0 {
		s.q.fail(fmt.Errorf("keyed stateful %q: needs a function and at least one state", name))
	}
	for _, st := range states {
		if err := statesvc.CheckName(st); err != nil || st == "" {
			s.q.fail(fmt.Errorf("keyed stateful %q: bad state name %q", name, st))
		}
	}
	states = slices.Clone(states)
	return s.then(name, func(OperatorContext) (Operator, error) {
		return &statefulFunc{states: states, fn: fn}, nil
	}, true)
}

// Window aggregates each key's records per event-time window and emits one
// result per (key, window) when the watermark passes the window's end.
// newAgg is called once per task.
func (s *Stream) Window(name string, spec WindowSpec, newAgg func() Aggregator) *Stream {
	f, err := NewWindowFactory(spec, newAgg)
	if err != nil {
		s.q.fail(fmt.Errorf("window %q: %w", name, err))
	}
	return s.then(name, f, true)
}

// Join joins s (left, input 0) with right (input 1) by record key.
func (s *Stream) Join(name string, right *Stream, spec JoinSpec) *Stream {
	f, err := NewJoinFactory(spec)
	if err != nil {
		s.q.fail(fmt.Errorf("join %q: %w", name, err))
	}
	if right == nil || right.q != s.q {
		s.q.fail(fmt.Errorf("join %q: the right input must be a stream of the same query", name))
		return s.then(name, f, true)
	}
	if right.Name() == s.Name() {
		s.q.fail(fmt.Errorf("join %q: both inputs are %q", name, s.Name()))
	}
	return s.q.add(control.OperatorSpec{Name: name, Inputs: []string{s.Name(), right.Name()}, Keyed: true, Stateful: true}, f)
}

// Sink ends the stream in the runtime's counting sink (the exactness ledger
// counts records by source partition and offset).
func (s *Stream) Sink(name string) *QueryBuilder {
	s.q.add(control.OperatorSpec{Name: name, Kind: control.KindCountSink, Inputs: []string{s.Name()}, Keyed: true}, nil)
	return s.q
}

// CollectSink ends the stream in the sink that keeps the largest
// little-endian uint64 value per key (TaskStatus.KeyValues).
func (s *Stream) CollectSink(name string) *QueryBuilder {
	s.q.add(control.OperatorSpec{Name: name, Kind: control.KindCollectSink, Inputs: []string{s.Name()}, Keyed: true}, nil)
	return s.q
}

// RecordSink ends the stream in a sink that keeps the records in memory
// (see CollectedRecords): for tests and examples.
func (s *Stream) RecordSink(name string) *QueryBuilder {
	s.q.add(control.OperatorSpec{Name: name, Kind: control.KindRecordSink, Inputs: []string{s.Name()}, Keyed: true}, nil)
	return s.q
}

// SinkFunc ends the stream in fn, called with every batch.
func (s *Stream) SinkFunc(name string, fn func([]Record) error) *QueryBuilder {
	if fn == nil {
		s.q.fail(fmt.Errorf("sink %q: function is nil", name))
	}
	s.then(name, Stateless(func(in []Record, _ Emit) error { return fn(in) }), false)
	return s.q
}

// Build checks the query, registers its operator kinds once and returns
// its operators in topological order (what queries.Register takes).
func (q *QueryBuilder) Build() ([]control.OperatorSpec, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.builtOK {
		return slices.Clone(q.built), nil
	}
	if q.err != nil {
		return nil, q.err
	}
	if len(q.ops) == 0 || q.ops[0].Kind != control.KindKafkaSource {
		return nil, fmt.Errorf("query %q: must start with a Source", q.name)
	}
	downstream := map[string]bool{}
	for _, op := range q.ops {
		for _, in := range op.Inputs {
			downstream[in] = true
		}
	}
	for _, op := range q.ops {
		if !downstream[op.Name] && len(op.Inputs) == 0 {
			return nil, fmt.Errorf("query %q: source %q feeds no operator", q.name, op.Name)
		}
	}
	kinds := make([]string, 0, len(q.kinds))
	for k := range q.kinds {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	registryMu.Lock()
	for _, k := range kinds {
		if _, dup := operators[k]; dup && !builtKinds[k] {
			registryMu.Unlock()
			return nil, fmt.Errorf("query %q: operator kind %q is already registered by other code", q.name, k)
		}
	}
	// A kind a builder registered may be registered again by a builder of
	// the same query (a test or an example run twice in one process).
	for _, k := range kinds {
		operators[k] = q.kinds[k]
		builtKinds[k] = true
	}
	registryMu.Unlock()
	q.built, q.builtOK = slices.Clone(q.ops), true
	return slices.Clone(q.built), nil
}

// builtKinds are the operator kinds registered by query builders
// (guarded by registryMu).
var builtKinds = map[string]bool{}

// MustBuild is Build for package init functions.
func (q *QueryBuilder) MustBuild() []control.OperatorSpec {
	ops, err := q.Build()
	if err != nil {
		panic(err)
	}
	return ops
}

// Stateless returns a factory of a stateless operator running fn.
func Stateless(fn func(in []Record, emit Emit) error) OperatorFactory {
	return func(OperatorContext) (Operator, error) { return OperatorFunc(fn), nil }
}

// statefulFunc adapts a per-record function to StatefulOperator.
type statefulFunc struct {
	states []string
	fn     func(r Record, st *State, emit Emit) error
}

func (s *statefulFunc) StateNames() []string { return s.states }

func (s *statefulFunc) ProcessBatch([]Record, Emit) error {
	return errors.New("keyed stateful operator called without keyed state (its input must be keyed)")
}

func (s *statefulFunc) ProcessKeyed(in []Record, st *State, emit Emit) error {
	for _, r := range in {
		if err := s.fn(r, st, emit); err != nil {
			return err
		}
	}
	return nil
}

// MaxCollectedRecords bounds the memory a record sink uses per job.
const MaxCollectedRecords = 1 << 20

type recordBuffer struct {
	mu      sync.Mutex
	recs    []Record
	dropped atomic.Uint64
}

var recordSinks sync.Map // job id → *recordBuffer

func recordBufferOf(jobID string) *recordBuffer {
	b, _ := recordSinks.LoadOrStore(jobID, &recordBuffer{})
	return b.(*recordBuffer)
}

// CollectedRecords returns a copy of what the record sinks of job received.
func CollectedRecords(jobID string) []Record {
	b := recordBufferOf(jobID)
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.recs)
}

// ForgetCollected drops what the record sinks of job kept.
func ForgetCollected(jobID string) { recordSinks.Delete(jobID) }

type recordSink struct{ buf *recordBuffer }

func (s recordSink) ProcessBatch(in []Record, _ Emit) error {
	s.buf.mu.Lock()
	defer s.buf.mu.Unlock()
	for _, r := range in {
		if len(s.buf.recs) >= MaxCollectedRecords {
			s.buf.dropped.Add(1)
			continue
		}
		r.Key, r.Value = slices.Clone(r.Key), slices.Clone(r.Value)
		s.buf.recs = append(s.buf.recs, r)
	}
	return nil
}

func (s recordSink) Counters() map[string]uint64 {
	s.buf.mu.Lock()
	n := len(s.buf.recs)
	s.buf.mu.Unlock()
	return map[string]uint64{"records_kept": uint64(n), "records_dropped": s.buf.dropped.Load()}
}

func init() {
	MustRegisterOperator(control.KindRecordSink, func(ctx OperatorContext) (Operator, error) {
		return recordSink{buf: recordBufferOf(ctx.Job.JobID)}, nil
	})
}
