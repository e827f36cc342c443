package wftest

import (
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries"
	"koala/statesvc"
	"koala/workflows"
)

// Protocol is one reconfiguration protocol of the exactness matrix, with
// the state backend and job parameters it runs with.
type Protocol struct {
	Name     string
	Workflow any // the reconfiguration workflow function
	// Backend is the state backend; "remote-pebble" starts a state server
	// for the run.
	Backend string
	Params  map[string]string
}

// Protocols are the matrix's protocols: lazy with eventual and with
// fetch-on-demand migration, stop-and-restart, remote (stop-and-restart
// over the remote state service, so only metadata moves) and DRRS.
func Protocols() []Protocol {
	lazy := func(mode string) map[string]string {
		return map[string]string{control.ParamMigrationMode: mode, control.ParamGradualBatchSize: "100"}
	}
	return []Protocol{
		{Name: "lazy-eventual", Workflow: workflows.ReconfigureLazy, Backend: statesvc.BackendPebble, Params: lazy(control.ModeEventual)},
		{Name: "lazy-fetch-on-demand", Workflow: workflows.ReconfigureLazy, Backend: statesvc.BackendPebble, Params: lazy(control.ModeFetchOnDemand)},
		{Name: "stop-and-restart", Workflow: workflows.ReconfigureStopAndRestart, Backend: statesvc.BackendPebble},
		{Name: "remote", Workflow: workflows.ReconfigureStopAndRestart, Backend: statesvc.BackendRemotePebble},
		{Name: "drrs", Workflow: workflows.ReconfigureDRRS, Backend: statesvc.BackendPebble},
	}
}

// MatrixCase is one query of the exactness matrix: its input, the operator
// rescaled and the oracle that judges the output.
type MatrixCase struct {
	Query string // a registered query
	// Operator is rescaled From → To (scale-out) and back (scale-in) while
	// the input flows. From defaults to 2, To to From+1.
	Operator    string
	From, To    int
	Parallelism map[string]int // other operators' parallelism
	Params      map[string]string
	Workers     int // default 3
	// Input is produced in four parts: the first before the tasks start,
	// the second while the operator scales out, the third while it scales
	// in, the last after.
	Input            []dataplane.Record
	ManualPartitions bool
	// Check compares the output (res, or r.SinkValues for collecting
	// sinks) with an oracle computed from Input alone. The matrix itself
	// checks the sink ledger: no duplicate, every record once where the
	// ledger checks the query, and nothing reordered where its output keeps
	// per-key order. Nil: the ledger is the oracle (count sinks).
	Check func(t *testing.T, r *Run, res Result)
}

// While a rescale runs, the input flows at matrixChunk records every
// matrixPause (2 K records/s) and the rescaled operator's tasks take
// matrixRecordCost per record (1 K records/s each), so its old owners hold
// a backlog when the routes swap: records routed the new way would
// overtake it if a protocol did not keep per-key order.
const (
	matrixChunk      = 10
	matrixPause      = 5 * time.Millisecond
	matrixRecordCost = time.Millisecond
)

// slowOperator makes every task of one operator take perRecord per record
// while on is set.
type slowOperator struct {
	op        string
	perRecord time.Duration
	on        *atomic.Bool
}

func (s slowOperator) BeforeBatch(_, operator, _ string, n int) {
	if operator == s.op && s.on.Load() {
		time.Sleep(time.Duration(n) * s.perRecord)
	}
}

// RunMatrix runs every case under every protocol, each as its own subtest
// "<query>/<protocol>".
func RunMatrix(t *testing.T, cases []MatrixCase) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	for _, c := range cases {
		t.Run(c.Query, func(t *testing.T) {
			for _, p := range Protocols() {
				t.Run(p.Name, func(t *testing.T) { runMatrixCase(t, c, p) })
			}
		})
	}
}

func runMatrixCase(t *testing.T, c MatrixCase, p Protocol) {
	from, to := c.From, c.To
	if from == 0 {
		from = 2
	}
	if to == 0 {
		to = from + 1
	}
	workers := c.Workers
	if workers == 0 {
		workers = 3
	}
	params := maps.Clone(c.Params)
	if params == nil {
		params = map[string]string{}
	}
	maps.Copy(params, p.Params)
	if p.Backend == statesvc.BackendRemotePebble {
		// Started before the cluster so it stops after the workers.
		srv, err := statesvc.NewServer(statesvc.ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		params[control.ParamRemotePebbleAddrs] = srv.Addr()
	}
	par := maps.Clone(c.Parallelism)
	if par == nil {
		par = map[string]int{}
	}
	par[c.Operator] = from
	in := c.Input
	q := len(in) / 4
	if q == 0 {
		t.Fatalf("%s: %d input records, want at least 4", c.Query, len(in))
	}
	slow := &atomic.Bool{}
	rescale := func(r *Run, part []dataplane.Record, n int) {
		slow.Store(true)
		done := make(chan struct{})
		wait := r.ProduceWhile(part, matrixChunk, matrixPause, done)
		r.Rescale(p.Workflow, c.Operator, n)
		slow.Store(false)
		close(done)
		wait()
		if got := len(r.Dep.TasksOf(c.Operator)); got != n {
			t.Fatalf("%s has %d tasks after the rescale, want %d", c.Operator, got, n)
		}
	}
	run := Start(t, Options{
		Faults: slowOperator{op: c.Operator, perRecord: matrixRecordCost, on: slow},
		Query:  c.Query, JobID: "m-" + c.Query + "-" + p.Name, Parallelism: par, Params: params, Backend: p.Backend,
		Workers: workers, ManualPartitions: c.ManualPartitions, Timeout: 4 * time.Minute,
		Phases: []Phase{
			{Records: in[:q], Then: func(r *Run) { rescale(r, in[q:2*q], to) }},
			{Then: func(r *Run) { rescale(r, in[2*q:3*q], from) }},
			{Records: in[3*q:]},
		},
	})
	res := run.Run()
	if res.Sink.Duplicates != 0 {
		t.Errorf("sink ledger: %d duplicates", res.Sink.Duplicates)
	}
	if queries.Unchecked(c.Query) == "" && res.Sink.Distinct != uint64(len(in)) {
		t.Errorf("sink ledger: %d distinct source records, %d produced", res.Sink.Distinct, len(in))
	}
	switch why := queries.Unordered(c.Query); {
	case why == "" && !res.Sink.OrderChecked:
		t.Errorf("%s keeps per-key order, but its sinks did not check it", c.Query)
	case res.Sink.Reordered != 0:
		t.Errorf("sink ledger: %d records arrived after a later record of their key", res.Sink.Reordered)
	case why != "":
		t.Logf("order not checked by the ledger: %s", why)
	}
	if t.Failed() {
		t.FailNow()
	}
	if c.Check != nil {
		c.Check(t, run, res)
	} else if queries.Unchecked(c.Query) != "" {
		t.Fatalf("%s: the sink ledger does not check this query and the case has no oracle", c.Query)
	}
	t.Logf("%s under %s: %d records, %s %d→%d→%d, exact", c.Query, p.Name, len(in), c.Operator, from, to, from)
}
