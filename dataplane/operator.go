package dataplane

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
)

// Emit hands one output record to the runtime, which routes and batches it.
type Emit func(Record)

// Operator processes one batch at a time for one task. Implementations are
// called from a single goroutine per task and need no locking.
type Operator interface {
	ProcessBatch(in []Record, emit Emit) error
}

// Closer is implemented by operators holding resources.
type Closer interface{ Close() error }

// OperatorFunc adapts a function to Operator.
type OperatorFunc func(in []Record, emit Emit) error

// ProcessBatch calls f.
func (f OperatorFunc) ProcessBatch(in []Record, emit Emit) error { return f(in, emit) }

// OperatorContext is what a factory learns about the task it builds for.
type OperatorContext struct {
	Job     control.JobSpec
	Spec    control.OperatorSpec
	TaskID  string
	Index   int
	DataDir string
	Logger  *slog.Logger
	// DeadLetters takes the records the operator cannot use (kafkaio/deadletter.go).
	DeadLetters *kafkaio.DeadLetters
}

// OperatorFactory builds the operator of one task.
type OperatorFactory func(ctx OperatorContext) (Operator, error)

var (
	registryMu sync.RWMutex
	operators  = map[string]OperatorFactory{}
)

// RegisterOperator makes kind available to job specs. Registering a kind
// twice is a programming error reported as an error, not a panic.
func RegisterOperator(kind string, f OperatorFactory) error {
	if kind == "" || f == nil {
		return fmt.Errorf("register operator: kind and factory are required")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := operators[kind]; dup {
		return fmt.Errorf("register operator: kind %q already registered", kind)
	}
	operators[kind] = f
	return nil
}

// MustRegisterOperator is RegisterOperator for package init functions.
func MustRegisterOperator(kind string, f OperatorFactory) {
	if err := RegisterOperator(kind, f); err != nil {
		panic(err)
	}
}

// OperatorKinds lists registered kinds, sorted.
func OperatorKinds() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	kinds := []string{control.KindKafkaSource}
	for k := range operators {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

func newOperator(ctx OperatorContext) (Operator, error) {
	registryMu.RLock()
	f, ok := operators[ctx.Spec.Kind]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("operator %q: unknown kind %q (known: %s)", ctx.Spec.Name, ctx.Spec.Kind, strings.Join(OperatorKinds(), ", "))
	}
	return f(ctx)
}

func init() {
	MustRegisterOperator(control.KindCountSink, func(OperatorContext) (Operator, error) {
		return OperatorFunc(func([]Record, Emit) error { return nil }), nil
	})
}
