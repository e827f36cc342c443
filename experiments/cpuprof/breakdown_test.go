package cpuprof

import (
	"math"
	"testing"

	"github.com/google/pprof/profile"
)

// stackProfile is a CPU profile with one sample per stack (leaf first), of
// the given milliseconds each.
func stackProfile(stacks [][]string, ms []int64) *profile.Profile {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}}
	fns := map[string]*profile.Function{}
	for i, st := range stacks {
		var locs []*profile.Location
		for _, name := range st {
			f := fns[name]
			if f == nil {
				f = &profile.Function{ID: uint64(len(fns) + 1), Name: name}
				fns[name] = f
				p.Function = append(p.Function, f)
			}
			l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
			p.Location = append(p.Location, l)
			locs = append(locs, l)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{1, ms[i] * 1e6}})
	}
	return p
}

func TestBreakdownFirstMatchingCategoryWins(t *testing.T) {
	const (
		runKeyed  = "koala/dataplane.(*task).runKeyed"
		takeState = "koala/dataplane.(*Worker).takeState"
		grpc      = "google.golang.org/grpc.(*Server).handleStream"
		getCold   = "koala/statesvc.(*Pebble).GetCold"
		seek      = "github.com/cockroachdb/pebble/v2.(*Iterator).SeekPrefixGE"
		compact   = "github.com/cockroachdb/pebble/v2.(*DB).compact1"
		gc        = "runtime.gcBgMarkWorker"
	)
	p := stackProfile([][]string{
		{seek, getCold, takeState, grpc},                      // serving a fetch inside gRPC: serving
		{seek, "koala/statesvc.(*Pebble).MultiGet", runKeyed}, // the operator's state read
		{"koala/queries/traces.pushBounded", runKeyed},        // the operator's own work
		{"runtime.memmove", grpc},                             // exchange
		{compact},
		{gc},
		{"main.unknown"},
	}, []int64{40, 20, 10, 10, 10, 5, 5})
	cats := []Category{
		{Name: "serving", Any: []string{takeState}},
		{Name: "op state", All: []string{runKeyed, "koala/statesvc."}},
		{Name: "op rest", Any: []string{runKeyed}},
		{Name: "compactions", Any: []string{"pebble/v2.(*DB).compact"}},
		{Name: "exchange", Any: []string{"google.golang.org/grpc"}},
		{Name: "gc", Any: []string{gc}},
	}
	s, err := Breakdown(p, cats, PebbleReads)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{40, 20, 10, 10, 10, 5, 5}
	if math.Abs(s.CPUSec-0.1) > 1e-9 || len(s.Shares) != len(want) {
		t.Fatalf("split %+v, want 0.1 CPU-s and %d shares", s, len(want))
	}
	for i, w := range want {
		if math.Abs(s.Shares[i]-w) > 1e-9 {
			t.Errorf("%s: %.2f %%, want %.0f", Names(cats)[i], s.Shares[i], w)
		}
	}
	if math.Abs(s.Across-60) > 1e-9 {
		t.Errorf("Pebble reads %.2f %%, want 60 (the served fetch and the operator's read)", s.Across)
	}
	if got := Names(cats); got[len(got)-1] != Other || len(got) != len(cats)+1 {
		t.Errorf("names %q", got)
	}
}

func TestBreakdownEmptyAndBadProfiles(t *testing.T) {
	s, err := Breakdown(stackProfile(nil, nil), WorkerCategories, PebbleReads)
	if err != nil || s.CPUSec != 0 || len(s.Shares) != len(WorkerCategories)+1 {
		t.Fatalf("no samples: %+v, %v", s, err)
	}
	if _, err := Breakdown(&profile.Profile{}, WorkerCategories, PebbleReads); err == nil {
		t.Error("a profile without sample types: no error")
	}
}
