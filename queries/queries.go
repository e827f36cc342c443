// Package queries owns the query definitions users run (the hello world,
// examples, later Nexmark and the trace queries) and registers their
// operator kinds with the data plane.
package queries

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"koala/dataplane"
	"koala/dataplane/control"
)

// Query describes a dataflow: its operators in topological order with
// their default parallelism.
type Query struct {
	Name        string
	Description string
	Operators   []control.OperatorSpec
	// Unchecked says why the run's sink ledger cannot check this query's
	// exactness: the ledger counts source records reaching the sink, which
	// only holds when every record passes through once (maps, keyed
	// counters). Filters, joins and aggregates say so here and are checked by
	// their oracle tests instead. Empty means the ledger checks the run.
	Unchecked string
	// Unordered says why the sink ledger cannot check per-key order for a
	// ledger-checked query: order is judged per (sink key, source
	// partition), which holds only when every record of a key at the sink
	// travelled one keyed path from its source partition. Empty means the
	// ledger checks order too.
	Unordered string
}

var registry = map[string]Query{}

// Register adds q; names are unique.
func Register(q Query) error {
	if _, dup := registry[q.Name]; dup {
		return fmt.Errorf("query %q already registered", q.Name)
	}
	registry[q.Name] = q
	return nil
}

// Names lists the registered queries, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns query name as registered, and whether it is.
func Lookup(name string) (Query, bool) {
	q, ok := registry[name]
	return q, ok
}

// Unchecked returns why the sink ledger cannot check query name's exactness
// ("" when it can, or when the query is unknown).
func Unchecked(name string) string { return registry[name].Unchecked }

// Unordered returns why the sink ledger cannot check per-key order for
// query name: its exactness is unchecked, or its output has no per-key
// order ("" when the ledger checks order).
func Unordered(name string) string {
	q := registry[name]
	if q.Unchecked != "" {
		return q.Unchecked
	}
	return q.Unordered
}

// Operators returns the operators of query name with parallelism taken
// from parallelism (operator name → tasks) where given. Unknown queries and
// unknown operator names are errors naming what is allowed.
func Operators(name string, parallelism map[string]int) ([]control.OperatorSpec, error) {
	return OperatorsFor(name, parallelism, nil)
}

// OperatorsFor is Operators for a job with params: ParamSinkKind may
// replace the query's sinks (sink_kind.go).
func OperatorsFor(name string, parallelism map[string]int, params map[string]string) ([]control.OperatorSpec, error) {
	q, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("QueryName %q is unknown (known: %s)", name, strings.Join(Names(), ", "))
	}
	ops := make([]control.OperatorSpec, len(q.Operators))
	copy(ops, q.Operators)
	known := map[string]bool{}
	for i := range ops {
		known[ops[i].Name] = true
		if p, ok := parallelism[ops[i].Name]; ok {
			if p < 1 {
				return nil, fmt.Errorf("parallelism of operator %q is %d: must be ≥ 1", ops[i].Name, p)
			}
			ops[i].Parallelism = p
		}
	}
	var unknown []string
	for op := range parallelism {
		if !known[op] {
			unknown = append(unknown, op)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		var names []string
		for _, op := range ops {
			names = append(names, op.Name)
		}
		return nil, fmt.Errorf("query %q has no operator %s (operators: %s)", name, strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	return withSinkKind(name, ops, params)
}

// KindHelloMapper is the hello world's keyed stateless map.
const KindHelloMapper = "hello-mapper"

func init() {
	dataplane.MustRegisterOperator(KindHelloMapper, func(dataplane.OperatorContext) (dataplane.Operator, error) {
		return dataplane.OperatorFunc(helloMap), nil
	})
	if err := Register(Query{
		Name:        "hello",
		Description: "src -> mapper -> sink: a keyed stateless map that upper-cases keys",
		Operators: []control.OperatorSpec{
			{Name: "source", Kind: control.KindKafkaSource, Parallelism: 1},
			{Name: "mapper", Kind: KindHelloMapper, Parallelism: 1, Inputs: []string{"source"}, Keyed: true},
			{Name: "sink", Kind: control.KindCountSink, Parallelism: 1, Inputs: []string{"mapper"}},
		},
	}); err != nil {
		panic(err)
	}
}

// helloMap upper-cases the key and keeps the record's identity, so the sink
// can check that every input record arrived exactly once.
// The upper-cased keys of a batch share one buffer instead of one
// allocation each (ASCII keys; others go through bytes.ToUpper).
func helloMap(in []dataplane.Record, emit dataplane.Emit) error {
	total := 0
	for i := range in {
		total += len(in[i].Key)
	}
	buf := make([]byte, 0, total)
	for _, r := range in {
		start := len(buf)
		ascii := true
		for _, c := range r.Key {
			if c >= utf8.RuneSelf {
				ascii = false
				break
			}
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			buf = append(buf, c)
		}
		if ascii {
			r.Key = buf[start:len(buf):len(buf)]
		} else {
			buf = buf[:start]
			r.Key = bytes.ToUpper(r.Key)
		}
		emit(r)
	}
	return nil
}
