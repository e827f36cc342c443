package nexmark_test

import (
	"fmt"
	"testing"

	"koala/queries"
	"koala/queries/nexmark"
	"koala/workflows"
	"koala/workflows/wftest"
)

// TestArtifactNames checks the artifact's query names are registered with
// the operators its configs name.
func TestArtifactNames(t *testing.T) {
	want := map[string][]string{
		"nexmark_query1": {"source", "mapper", "sink"},
		"nexmark_query4": {"source", "q4-auctions", "q4-close", "q4-average", "sink"},
		"nexmark_query6": {"source", "q6-auctions", "q6-close", "q6-average", "sink"},
		"nexmark_query8": {"source", "q8-persons", "q8-auctions", "q8-join", "q8-result", "sink"},
	}
	for _, q := range []string{"2", "3", "5", "7"} {
		ops, err := queries.Operators("nexmark-q"+q, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			want["nexmark_query"+q] = append(want["nexmark_query"+q], op.Name)
		}
	}
	for name, names := range want {
		ops, err := queries.Operators(name, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, op := range ops {
			got = append(got, op.Name)
		}
		if fmt.Sprint(got) != fmt.Sprint(names) {
			t.Errorf("%s operators %v, want %v", name, got, names)
		}
	}
	ops, _ := queries.Operators("nexmark_query1", nil)
	if !ops[1].Stateful || !ops[1].Keyed {
		t.Errorf("nexmark_query1 mapper: stateful %v keyed %v, want a keyed stateful operator", ops[1].Stateful, ops[1].Keyed)
	}
}

// TestArtifactQ1AcrossScaleOut runs nexmark_query1 and scales its mapper
// 1 → 2 with the lazy protocol mid-stream: the output is q1's, exactly.
func TestArtifactQ1AcrossScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	const name = "nexmark_query1-records"
	if _, dup := registered.LoadOrStore(name, true); !dup {
		if err := queries.Register(queries.Query{Name: name, Operators: nexmark.BuildArtifactQ1(name, nexmark.RecordSink).MustBuild()}); err != nil {
			t.Fatal(err)
		}
	}
	recs, events := input()
	half := len(recs) / 2
	moved := false
	res := wftest.RunQuery(t, wftest.Options{Query: name, Backend: "pebble", Workers: 3, Phases: []wftest.Phase{
		{Records: recs[:half], Until: func(r *wftest.Run) bool { return len(r.Output()) > 0 }, Then: func(r *wftest.Run) {
			r.Rescale(workflows.ReconfigureLazy, "mapper", 2)
			moved = len(r.Dep.TasksOf("mapper")) == 2
		}},
		{Records: recs[half:]},
	}})
	if !moved {
		t.Fatal("the mapper was not scaled out")
	}
	if n := res.Counter("mapper", "malformed_records"); n != uint64(len(malformed)) {
		t.Fatalf("malformed records counted %d, want %d", n, len(malformed))
	}
	checkQ1(t, res.Output, events)
}
