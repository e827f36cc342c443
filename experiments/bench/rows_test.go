package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
	"koala/experiments"
	"koala/queries/nexmark"
	"koala/statesvc"
	"koala/workflows"
)

func TestParseRows(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"all", SelectableRows(), ""},
		{"autoscale-sr", []string{RowAutoscaleSR}, ""},
		{"q6-1task", []string{RowQ6One}, ""},
		{" Q1-1SRC , counter-10m", []string{RowCounter10M, RowQ1One}, ""},
		{"", nil, "empty"},
		{"q1", nil, `unknown row "q1"`},
		{"hello,hello", nil, "named twice"},
	} {
		got, err := ParseRows(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseRows(%q) error = %v, want it to contain %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRows(%q): %v", c.in, err)
			continue
		}
		var names []string
		for _, n := range SelectableRows() {
			if got[n] {
				names = append(names, n)
			}
		}
		if !reflect.DeepEqual(names, c.want) || len(got) != len(c.want) {
			t.Errorf("ParseRows(%q) = %v, want %v", c.in, names, c.want)
		}
	}
}

// defaultRows are the rows with the configs koala bench uses by default,
// relative to this package's directory.
func defaultRows() []Row {
	rows := BenchRows(Options{HelloConfig: "hello-steady.json", CounterConfig: "counter-steady.json", WindowConfig: "nexmark-q5-steady.json"})
	for i := range rows {
		rows[i].Config = filepath.Base(rows[i].Config)
		if rows[i].WarmUp != "" {
			rows[i].WarmUp = filepath.Base(rows[i].WarmUp)
		}
	}
	return rows
}

func loadRow(t *testing.T, cfg string) workflows.ExperimentInput {
	t.Helper()
	in, err := experiments.LoadConfig(cfg)
	if err != nil {
		t.Fatalf("%s: %v", cfg, err)
	}
	return in
}

// Headline rows run as a user gets them; tuned rows really change what
// their label says and carry no target; the configs the rows name exist
// beside this package (the paths BenchRows gives are these files).
func TestRowConfigsHeadlineAndTuned(t *testing.T) {
	rows := defaultRows()
	if len(rows) != len(RowNames()) {
		t.Fatalf("%d rows with configs, %d names", len(rows), len(RowNames()))
	}
	for _, row := range allRows(Options{}) {
		if row.Config != "" && !strings.HasPrefix(row.Config, "experiments/bench/") {
			t.Errorf("row %s: config %q is not under experiments/bench/", row.Name, row.Config)
		}
	}
	for _, row := range rows {
		in := loadRow(t, row.Config)
		minB, wait, err := fetchSizes(in.Params)
		if err != nil {
			t.Fatalf("%s: %v", row.Name, err)
		}
		defaults := minB == kafkaio.DefaultSourceFetchMinBytes && wait == kafkaio.DefaultSourceFetchMaxWaitMs
		placement := in.Params[control.ParamTaskPlacement]
		if row.Tuned == "" {
			if !defaults || placement != "" {
				t.Errorf("headline row %s (%s): fetch %d B / %d ms, placement %q; want the defaults", row.Name, row.Config, minB, wait, placement)
			}
			continue
		}
		if row.PerCore != 0 || row.Sustained != 0 {
			t.Errorf("tuned row %s has targets", row.Name)
		}
		if minB != 1<<20 || wait != 100 {
			t.Errorf("tuned row %s says %q but fetches %d B / %d ms", row.Name, row.Tuned, minB, wait)
		}
		if colocated := placement == "co-locate"; colocated != strings.Contains(row.Tuned, "co-located") {
			t.Errorf("tuned row %s says %q, placement %q", row.Name, row.Tuned, placement)
		}
	}
}

// The new rows run what their targets name.
func TestRowConfigsShapes(t *testing.T) {
	byName := map[string]Row{}
	for _, r := range defaultRows() {
		byName[r.Name] = r
	}
	for name, sources := range map[string]int{RowQ1One: 1, RowQ1Two: 2} {
		in := loadRow(t, byName[name].Config)
		if in.QueryName != nexmark.Q1 || in.Parallelism["source"] != sources || in.Parallelism["q1-currency"] != 1 {
			t.Errorf("%s: query %s, parallelism %v; want %s with %d source tasks", name, in.QueryName, in.Parallelism, nexmark.Q1, sources)
		}
		if in.Producer.Nexmark == nil || !reflect.DeepEqual(in.Producer.Nexmark.EventTypes, []string{"Bid"}) {
			t.Errorf("%s: not a bid stream: %+v", name, in.Producer.Nexmark)
		}
	}
	if in := loadRow(t, byName[RowCounter10M].Config); in.QueryName != "counter" || in.Producer.NumKeys != 10_000_000 {
		t.Errorf("counter-10m: query %s over %d keys", in.QueryName, in.Producer.NumKeys)
	}
	// A sustained target is judged only from a run that offers it.
	for _, r := range defaultRows() {
		if r.Sustained > 0 {
			if in := loadRow(t, r.Config); float64(in.Producer.RatePerSec) < r.Sustained {
				t.Errorf("%s offers %d/s, under its sustained target %.0f", r.Name, in.Producer.RatePerSec, r.Sustained)
			}
		}
	}
}

// A large-state row's warm-up builds, for the measured run to load, at
// least the state its targets need, and the measured run reads sellers
// over all of it.
func TestLargeStateRowsBuildTheirState(t *testing.T) {
	n := 0
	for _, r := range defaultRows() {
		if r.Phase != PhaseLargeState {
			continue
		}
		n++
		warm, measured := loadRow(t, r.WarmUp), loadRow(t, r.Config)
		if err := checkWarmUpFits(warm, measured, r.Operator); err != nil {
			t.Errorf("%s: %v", r.Name, err)
		}
		pad, err := strconv.Atoi(warm.Params[control.ParamDummyFieldSize])
		if err != nil {
			t.Fatalf("%s: DummyFieldSize %q", r.Name, warm.Params[control.ParamDummyFieldSize])
		}
		sellers := warm.Producer.MaxEvents // one new seller per closed auction
		if warm.Producer.Nexmark == nil || warm.Producer.Nexmark.Sellers != nexmark.SellersSequential {
			t.Errorf("%s: the warm-up does not draw one new seller per auction: %+v", r.Name, warm.Producer.Nexmark)
		}
		state := float64(sellers) * float64(nexmark.Q6ModStateBytes(pad))
		if state < r.MinStateBytes {
			t.Errorf("%s: the warm-up builds %d sellers × %d B = %.3g B, under the %.3g B the row needs", r.Name, sellers, nexmark.Q6ModStateBytes(pad), state, r.MinStateBytes)
		}
		// The state must also lie beyond the tasks' value caches by the
		// factor the row's proof asks for, or the row reports "not
		// measured": the caches grew from 32 to 512 MiB per task once,
		// and the two-task row stopped being measured.
		caches := float64(measured.Parallelism[r.Operator]) * float64(statesvc.ValueCacheLimit(statesvc.DefaultCacheBytes))
		if state < 1.05*StateCacheFactor*caches {
			t.Errorf("%s: the warm-up builds %.3g B, under %.0f × the %d tasks' value caches (%.3g B) with 5 %% to spare", r.Name, state, StateCacheFactor, measured.Parallelism[r.Operator], caches)
		}
		nx := measured.Producer.Nexmark
		if nx == nil || nx.Sellers != nexmark.SellersUniform || int64(nx.NumActivePeople) != sellers {
			t.Errorf("%s: the measured run does not read sellers uniformly over the warm-up's %d: %+v", r.Name, sellers, nx)
		}
		if measured.Parallelism[r.Operator] < 1 || measured.Parallelism[r.Operator] > 2 {
			t.Errorf("%s: %d stateful tasks", r.Name, measured.Parallelism[r.Operator])
		}
	}
	if n != 2 {
		t.Errorf("%d large-state rows, want 2 (1 and 2 stateful tasks)", n)
	}
}

func TestCheckWarmUpFits(t *testing.T) {
	warm := loadRow(t, "q6mod-warmup-1task.json")
	measured := loadRow(t, "q6mod-large-1task.json")
	if err := checkWarmUpFits(warm, measured, "statefulMapper"); err != nil {
		t.Fatalf("shipped pair: %v", err)
	}
	clone := func(in workflows.ExperimentInput) workflows.ExperimentInput {
		out := in
		out.Params, out.Parallelism = map[string]string{}, map[string]int{}
		for k, v := range in.Params {
			out.Params[k] = v
		}
		for k, v := range in.Parallelism {
			out.Parallelism[k] = v
		}
		return out
	}
	for _, c := range []struct {
		name    string
		change  func(w, m *workflows.ExperimentInput)
		wantErr string
	}{
		{"parallelism", func(_, m *workflows.ExperimentInput) { m.Parallelism["statefulMapper"] = 2 }, "parallelism"},
		{"pad", func(w, _ *workflows.ExperimentInput) { w.Params[control.ParamDummyFieldSize] = "1024" }, "DummyFieldSize"},
		{"buckets", func(w, _ *workflows.ExperimentInput) { w.NumBuckets = 64 }, "NumBuckets"},
		{"not a warm-up", func(w, _ *workflows.ExperimentInput) { delete(w.Params, control.ParamIsWarmUp) }, "IsWarmUp"},
		{"loads nothing", func(_, m *workflows.ExperimentInput) { delete(m.Params, control.ParamLoadWarmUpData) }, "LoadWarmUpData"},
		{"query", func(w, _ *workflows.ExperimentInput) { w.QueryName = "nexmark-q6mod" }, "query"},
	} {
		w, m := clone(warm), clone(measured)
		c.change(&w, &m)
		if err := checkWarmUpFits(w, m, "statefulMapper"); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: %v, want an error about %s", c.name, err, c.wantErr)
		}
	}
}

// Every JSON file here is a row's config, a warm-up, or a config of another
// phase, so none is left behind unused.
func TestEveryConfigIsUsed(t *testing.T) {
	used := map[string]bool{"counter-lazy-2to4.json": true, "counter-sr-2to4.json": true, "counter-4kb-2to4.json": true,
		"counter-autoscale.json": true} // the autoscale phase's (autoscale_test.go)
	for _, r := range defaultRows() {
		used[r.Config] = true
		if r.WarmUp != "" {
			used[r.WarmUp] = true
		}
	}
	files, _ := filepath.Glob("*.json")
	for _, f := range files {
		if !used[f] {
			t.Errorf("%s is used by no row", f)
		}
	}
	for f := range used {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("config %s: %v", f, err)
		}
	}
}
