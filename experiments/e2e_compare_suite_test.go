package experiments_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"koala/experiments"
	"koala/workflows"
)

// TestEndToEndCompareSuite runs a comparison suite through `koala suite`:
// one comparison of lazy against remote, for which the suite starts its
// own `koala statesvc` and stops it after. The suite's summary.json must
// list both runs under the artifact's keywords, summary.md its targets
// table, and `koala figures` must draw Fig 6 and 8 from it.
func TestEndToEndCompareSuite(t *testing.T) {
	cfg := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	m := readJSONObject(t, filepath.Join("testdata", "e2e", "lazy_counter.json"))
	m["KafkaBrokers"] = cfg.KafkaBrokers()
	m["Experiment"] = "e2e-compare-suite"
	writeJSONObject(t, filepath.Join(dir, "counter.json"), m)
	suite := filepath.Join(dir, "suite.json")
	if err := os.WriteFile(suite, []byte(`{"Name": "e2e-cmp", "Comparisons": [
		{"Config": "counter.json", "Protocols": ["lazy", "remote"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(dir, "results")

	check := runKoala(ctx, t, cfg.Env(), "suite", "--check", suite)
	if check.exitCode != 0 || !strings.Contains(check.stdout, "OK (e2e-cmp, 1 comparison(s)); nothing started") {
		t.Fatalf("suite --check: exit %d\n%s%s", check.exitCode, check.stdout, check.stderr)
	}

	res := runKoala(ctx, t, cfg.Env(), "suite", suite, "--results", results, "--gap", "1s", "--ui", cfg.TemporalUIURL())
	t.Logf("koala suite: exit %d in %s\n%s", res.exitCode, res.took.Round(time.Millisecond), res.stdout)
	if res.exitCode != 0 {
		t.Fatalf("koala suite exited %d\nstderr:\n%s%s", res.exitCode, res.stderr, stackLogTails(cfg))
	}
	pid := regexp.MustCompile(`started koala statesvc on \S+ \(pid (\d+)\)`).FindStringSubmatch(res.stdout)
	if pid == nil {
		t.Fatal("the suite did not say it started a koala statesvc for the remote run")
	}
	if n, _ := strconv.Atoi(pid[1]); syscall.Kill(n, 0) == nil {
		t.Errorf("the suite's koala statesvc (pid %d) still runs after the suite", n)
	}

	dirs, err := filepath.Glob(filepath.Join(results, "suite_*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("want one suite_* result directory under %s, got %v (%v)", results, dirs, err)
	}
	sum, err := experiments.ReadSuiteSummary(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if sum.Suite != "e2e-cmp" || sum.Planned != 2 || len(sum.Entries) != 2 {
		t.Fatalf("summary: suite %q, planned %d, %d entries; want e2e-cmp, 2, 2", sum.Suite, sum.Planned, len(sum.Entries))
	}
	for i, kw := range []string{"lazy", "Remote"} {
		e := sum.Entries[i]
		if e.Keyword != kw || e.Experiment != "e2e-compare-suite" || e.Status != workflows.SuiteSucceeded ||
			e.Produced == 0 || e.Lost != 0 || e.Duplicated != 0 || e.StartedAt.IsZero() || len(e.Reconfigs) != 1 {
			t.Errorf("entry %d: %+v; want keyword %s, succeeded, records produced, none lost or duplicated, one reconfiguration", i+1, e, kw)
		}
	}
	if sum.Entries[1].StateBackend != "remote-pebble" {
		t.Errorf("the remote entry ran on state backend %q", sum.Entries[1].StateBackend)
	}
	md, err := os.ReadFile(filepath.Join(dirs[0], "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`\| e2e-compare-suite \| — \| config's rate \| \S+ \| \d\.\d\d \(\d\.\d\d\) (met|missed) \|`).Match(md) {
		t.Errorf("summary.md lacks the experiment's targets row:\n%s", md)
	}

	// --report rebuilds summary.md from the comparisons kept, running nothing.
	if err := os.Remove(filepath.Join(dirs[0], "summary.md")); err != nil {
		t.Fatal(err)
	}
	rep := runKoala(ctx, t, cfg.Env(), "suite", "--report", dirs[0])
	if rep.exitCode != 0 {
		t.Fatalf("koala suite --report exited %d\n%s%s", rep.exitCode, rep.stdout, rep.stderr)
	}
	if again, err := os.ReadFile(filepath.Join(dirs[0], "summary.md")); err != nil || string(again) != string(md) {
		t.Errorf("summary.md after --report differs from the suite's (%v):\n%s", err, again)
	}

	figs := runKoala(ctx, t, cfg.Env(), "figures", dirs[0])
	if figs.exitCode != 0 {
		t.Fatalf("koala figures exited %d\n%s%s", figs.exitCode, figs.stdout, figs.stderr)
	}
	for _, f := range []string{experiments.Fig6ThroughputFile, experiments.Fig6LagFile, experiments.Fig8LatencyFile} {
		checkPNG(t, filepath.Join(dirs[0], "figures", strings.Replace(f, "%s", "e2e-compare-suite", 1)))
	}
}
