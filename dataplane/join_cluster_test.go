package dataplane_test

import (
	"bytes"
	"fmt"
	"sort"
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/workflows"
	"koala/workflows/wftest"
)

// side keeps the records whose value starts with prefix, keyed by the
// value's second field ("L|key|id").
func side(prefix string) func(r dataplane.Record, emit dataplane.Emit) error {
	return func(r dataplane.Record, emit dataplane.Emit) error {
		parts := bytes.Split(r.Value, []byte("|"))
		if len(parts) == 3 && string(parts[0]) == prefix {
			r.Key = parts[1]
			emit(r)
		}
		return nil
	}
}

var joinRescaleQuery = func() *dataplane.QueryBuilder {
	q := dataplane.NewQuery("test-join-rescale")
	src := q.Source("source", 1)
	left := src.FlatMap("left", side("L"))
	right := src.FlatMap("right", side("R"))
	left.Join("join", right, dataplane.JoinSpec{Join: func(key []byte, l, r dataplane.Record) (dataplane.Record, bool) {
		return dataplane.Record{Key: key, Value: append(append(append([]byte(nil), l.Value...), '+'), r.Value...)}, true
	}}).Parallelism(2).RecordSink("sink")
	return q
}()

// TestJoinAcrossLazyRescale joins two inputs while the join is rescaled
// 2→4→3 with records in flight: every matching pair is emitted exactly once.
func TestJoinAcrossLazyRescale(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	const numKeys = 60
	mk := func(from, to int) []dataplane.Record {
		var out []dataplane.Record
		for i := from; i < to; i++ {
			s := "L"
			if (i/7)%3 == 0 {
				s = "R"
			}
			k := fmt.Sprintf("j%03d", (i*13)%numKeys)
			out = append(out, dataplane.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s|%s|%d", s, k, i)), EventTime: t0 + int64(i)*int64(time.Millisecond)})
		}
		return out
	}
	all := mk(0, 6000)
	run := wftest.Start(t, wftest.Options{
		Query:   registerQuery(t, joinRescaleQuery),
		Params:  map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand},
		Backend: "pebble", Workers: 3,
		Phases: []wftest.Phase{{Records: all[:2000], Then: func(r *wftest.Run) {
			wait := r.ProduceAsync(all[2000:6000], 50, 2*time.Millisecond)
			r.Rescale(workflows.ReconfigureLazy, "join", 4)
			r.Rescale(workflows.ReconfigureLazy, "join", 3)
			wait()
		}}},
	})
	res := run.Run()
	byKey := map[string][][2]string{}
	var want []string
	for _, r := range all {
		parts := bytes.Split(r.Value, []byte("|"))
		k := string(parts[1])
		for _, o := range byKey[k] {
			if o[0] == string(parts[0]) {
				continue
			}
			l, rr := string(r.Value), o[1]
			if parts[0][0] == 'R' {
				l, rr = o[1], string(r.Value)
			}
			want = append(want, k+"="+l+"+"+rr)
		}
		byKey[k] = append(byKey[k], [2]string{string(parts[0]), string(r.Value)})
	}
	sort.Strings(want)
	if len(want) < 1000 {
		t.Fatalf("the oracle expects only %d pairs", len(want))
	}
	if d := wftest.Diff(wftest.Lines(res.Output, nil), want); d != "" {
		t.Fatal(d)
	}
	t.Logf("%d joined pairs exact across 2→4→3", len(want))
}
