package traces_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"koala/activities"
	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/queries"
	"koala/queries/traces"
	"koala/workflows"
	"koala/workflows/wftest"
)

var registered sync.Map

// recordQuery registers query q ending in a record sink once per process,
// with q's Unchecked and Unordered reasons, so the sink ledger judges the
// variant like the registered query.
func recordQuery(t testing.TB, q string) string {
	t.Helper()
	name := q + "-records"
	if _, dup := registered.LoadOrStore(name, true); !dup {
		reg, ok := queries.Lookup(q)
		if !ok {
			t.Fatalf("query %q is not registered", q)
		}
		b, err := traces.Build(q, name, traces.RecordSink)
		if err != nil {
			t.Fatal(err)
		}
		if err := queries.Register(queries.Query{Name: name, Operators: b.MustBuild(), Unchecked: reg.Unchecked, Unordered: reg.Unordered}); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

func skipShort(t testing.TB) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
}

// rescale is what a trace query's rescale tests scale: operator op, from
// parallelism 2, with the query's operators at par.
type rescale struct {
	op  string
	par map[string]int
}

// runRescaled runs recs through query q with every stateful operator at
// parallelism 2 (rs.par) and rescales rs.op lazily 2→4: the first third is
// in Kafka when the tasks start, the second flows while the rescale runs,
// the last is produced after it.
func runRescaled(t *testing.T, q string, rs rescale, params map[string]string, recs []dataplane.Record) wftest.Result {
	t.Helper()
	skipShort(t)
	op, par := rs.op, rs.par
	third := len(recs) / 3
	res := wftest.RunQuery(t, wftest.Options{
		Query: recordQuery(t, q), Parallelism: par, Params: params, Backend: "pebble", Workers: 3,
		Timeout: 4 * time.Minute,
		Phases: []wftest.Phase{{Records: recs[:third], Then: func(r *wftest.Run) {
			wait := r.ProduceAsync(recs[third:2*third], 100, 5*time.Millisecond)
			r.Rescale(workflows.ReconfigureLazy, op, 4)
			wait()
			if n := len(r.Dep.TasksOf(op)); n != 4 {
				t.Fatalf("%s has %d tasks after the rescale, want 4", op, n)
			}
		}}, {Records: recs[2*third:]}},
	})
	// The added tasks took over keys (with their migrated state).
	if n := res.Counter(op+"-2", "processed_records") + res.Counter(op+"-3", "processed_records"); n == 0 {
		t.Fatalf("the tasks added to %s processed no records", op)
	}
	return res
}

// run runs recs through query q without reconfiguration.
func run(t *testing.T, q string, par map[string]int, params map[string]string, recs []dataplane.Record) wftest.Result {
	t.Helper()
	skipShort(t)
	return wftest.RunQuery(t, wftest.Options{Query: recordQuery(t, q), Parallelism: par, Params: params, Phases: []wftest.Phase{{Records: recs}}})
}

// generate returns records 0..n-1 of the registered generator q.
func generate(t testing.TB, q string, numKeys int, seed int64, n int) []dataplane.Record {
	t.Helper()
	g, err := produce.NewGenerator(control.ProduceRequest{Generator: q, NumKeys: numKeys, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]dataplane.Record, n)
	for i := range out {
		g.Next(int64(i), &out[i])
	}
	return out
}

// csvInput writes good lines (spread over two files, each behind header
// when it is not empty) with the bad lines mixed in, reads the files back
// through generator q with FilePath and checks that every good line comes
// back in order, that the bad ones are counted (by the generator and by
// ReadCSV) and that the files are replayed after the last line.
func csvInput(t *testing.T, q, header string, good [][]byte, bad []string) []dataplane.Record {
	t.Helper()
	dir := t.TempDir()
	wantBad := int64(len(bad))
	var paths []string
	for f := 0; f < 2; f++ {
		var b bytes.Buffer
		eol := []string{"\n", "\r\n"}[f] // the second file has CRLF line endings
		if header != "" {
			b.WriteString(header + eol)
		}
		lo, hi := f*len(good)/2, (f+1)*len(good)/2
		for i, line := range good[lo:hi] {
			if i%97 == 5 && len(bad) > 0 && (i/97)%2 == f {
				b.WriteString(bad[0] + eol)
				bad = bad[1:]
			}
			b.Write(line)
			b.WriteString(eol)
		}
		if f == 1 {
			for _, l := range bad { // whatever did not fit in between
				b.WriteString(l + eol)
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("%s%d.csv", q, f))
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	g, err := produce.NewGenerator(control.ProduceRequest{Generator: q, FilePath: paths})
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]dataplane.Record, len(good))
	for i := range recs {
		g.Next(int64(i), &recs[i])
		if !bytes.Equal(recs[i].Value, good[i]) {
			t.Fatalf("file record %d is %q, want %q", i, recs[i].Value, good[i])
		}
	}
	mc, ok := g.(produce.MalformedCounter)
	if !ok {
		t.Fatalf("generator %s with FilePath does not count malformed lines", q)
	}
	if got := mc.Malformed(); got != wantBad {
		t.Fatalf("generator counted %d malformed lines, want %d", got, wantBad)
	}
	var again dataplane.Record
	g.Next(int64(len(good)), &again)
	if !bytes.Equal(again.Value, good[0]) || mc.Malformed() != wantBad {
		t.Fatalf("after the last line the generator gave %q (malformed %d), want the first line again (malformed %d)", again.Value, mc.Malformed(), wantBad)
	}
	all, n, err := traces.ReadCSV(q, paths)
	if err != nil || n != wantBad || len(all) != len(good) {
		t.Fatalf("ReadCSV: %d records, %d malformed, %v; want %d, %d", len(all), n, err, len(good), wantBad)
	}
	return recs
}

// injectBad mixes records no query can parse into recs (every 500th
// position) and returns the result and how many were mixed in.
func injectBad(recs []dataplane.Record, bad []dataplane.Record) ([]dataplane.Record, int) {
	var out []dataplane.Record
	n := 0
	for i, r := range recs {
		if i%500 == 250 && n < len(bad) {
			out = append(out, bad[n])
			n++
		}
		out = append(out, r)
	}
	return out, n
}

// compare fails t when got (sink records as key=value) differs from want.
func compare(t *testing.T, res wftest.Result, want []string) {
	t.Helper()
	sort.Strings(want)
	if len(want) == 0 {
		t.Fatal("the oracle expects no output")
	}
	if d := wftest.Diff(wftest.Lines(res.Output, nil), want); d != "" {
		t.Fatal(d)
	}
	t.Logf("%d output records match the oracle", len(want))
}

// medianOf is the oracle's median: the middle value, or the mean of the
// two middle values.
func medianOf(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func meanOf(vs []float64) float64 {
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	return sum / float64(len(vs))
}

func maxOf(vs []float64) float64 {
	m := vs[0]
	for _, v := range vs {
		if v > m {
			m = v
		}
	}
	return m
}

// lastN appends v to the window of the last n values.
func lastN[T any](w []T, v T, n int) []T {
	w = append(w, v)
	if len(w) > n {
		w = append([]T(nil), w[len(w)-n:]...)
	}
	return w
}

// benchQuery reports events/s of registered query q end to end on the
// in-process cluster (2 workers, memory state): b.N generated records,
// produced before the tasks start, timed from start to drained.
func benchQuery(b *testing.B, q string, numKeys int, params map[string]string) {
	b.StopTimer()
	recs := generate(b, q, numKeys, 1, b.N)
	r := wftest.Start(b, wftest.Options{Query: q, Params: params, JobID: fmt.Sprintf("bench-%s-%d", q, b.N), Timeout: 10 * time.Minute})
	r.Produce(recs)
	b.StartTimer()
	start := time.Now()
	if err := r.Acts.StartTasks(r.Ctx, activities.TasksInput{Deployment: r.Dep}); err != nil {
		b.Fatal(err)
	}
	res := r.Finish()
	el := time.Since(start)
	if res.Sink.Distinct != uint64(b.N) {
		b.Fatalf("sink saw %d distinct records, want %d", res.Sink.Distinct, b.N)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
}
