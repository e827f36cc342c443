package experiments_test

// Bad input at the byte level: every fuzz target of the module runs for a
// bounded time, one after another, each as its own `go test -fuzz`.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// fuzzTargets lists every fuzz target of the module; TestFaultFuzzTargets
// fails when a Fuzz function is missing here. The three decoders of outside
// input — the record codec, the experiment config parser and the NATS
// control-message decoder — are fuzzed a minute each; the others get a short
// run that still catches regressions against their seed corpus.
var fuzzTargets = []struct {
	pkg, name string
	time      time.Duration
}{
	{"./dataplane/wire", "FuzzDecodeFrame", time.Minute},
	{"./dataplane", "FuzzDecodeList", 10 * time.Second},
	{"./dataplane/control", "FuzzDecodeEnvelope", time.Minute},
	{"./dataplane/control", "FuzzVerbOf", 10 * time.Second},
	{"./experiments", "FuzzParseConfig", time.Minute},
	{"./statesvc", "FuzzDecodeKLT", 10 * time.Second},
	{"./statesvc", "FuzzKLTOps", 10 * time.Second},
	{"./statesvc", "FuzzParseStateKey", 10 * time.Second},
	{"./queries/nexmark", "FuzzParse", 10 * time.Second},
	{"./queries/nexmark", "FuzzDecodeResults", 10 * time.Second},
}

// TestFaultFuzzTargets runs each fuzz target for its time in fuzzTargets
// (KOALA_FUZZTIME=5m sets the time of every target instead), one at a time
// with one fuzzing worker, and fails if any finds a crasher (which `go test`
// then saves under the package's testdata/fuzz/).
func TestFaultFuzzTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("fuzzes every target, about four minutes in all")
	}
	root := repoRoot(t)
	checkFuzzTargetsListed(t, root)

	var override time.Duration
	if v := os.Getenv("KOALA_FUZZTIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("KOALA_FUZZTIME=%q: want a positive duration such as 90s", v)
		}
		override = d
	}
	for _, ft := range fuzzTargets {
		per := ft.time
		if override > 0 {
			per = override
		}
		t.Run(ft.name, func(t *testing.T) {
			// Building the instrumented test binary can take minutes on a
			// loaded machine; the fuzzing itself is bounded by -fuzztime.
			ctx, cancel := context.WithTimeout(context.Background(), per+15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", "test", "-run=^$", "-fuzz=^"+ft.name+"$",
				"-fuzztime="+per.String(), "-parallel=1", ft.pkg)
			cmd.Dir = root
			cmd.Env = cleanEnv()
			cmd.WaitDelay = 10 * time.Second
			corpusBefore := crasherFiles(t, root, ft.pkg, ft.name)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
			if err != nil && deadlineRaceOnly(string(out), corpusBefore, crasherFiles(t, root, ft.pkg, ft.name)) {
				// The Go fuzz coordinator can report its own -fuzztime
				// deadline as a failure when a starved worker is still
				// mid-call (golang/go#75804, fixed after go1.26). No input
				// failed: no crasher was written and none is reported.
				t.Logf("%s %s: %s in %s; ended with the fuzz coordinator's deadline race (no failing input)",
					ft.pkg, ft.name, lastProgress(string(out)), took.Round(time.Second))
				return
			}
			if err != nil {
				t.Fatalf("go test -fuzz=%s %s failed after %s: %v\n%s", ft.name, ft.pkg, took.Round(time.Second), err, tail(string(out), 40))
			}
			t.Logf("%s %s: %s in %s", ft.pkg, ft.name, lastProgress(string(out)), took.Round(time.Second))
		})
	}
}

// checkFuzzTargetsListed fails the test when a `func FuzzX(` of the
// module's test files is not in fuzzTargets.
func checkFuzzTargetsListed(t *testing.T, root string) {
	t.Helper()
	fuzzFunc := regexp.MustCompile(`^func (Fuzz\w+)\(`)
	var found []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if m := fuzzFunc.FindStringSubmatch(sc.Text()); m != nil {
				rel, _ := filepath.Rel(root, filepath.Dir(path))
				found = append(found, fmt.Sprintf("./%s %s", filepath.ToSlash(rel), m[1]))
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, ft := range fuzzTargets {
		listed = append(listed, ft.pkg+" "+ft.name)
	}
	for _, f := range found {
		if !slices.Contains(listed, f) {
			t.Errorf("fuzz target %s is not in fuzzTargets", f)
		}
	}
	for _, l := range listed {
		if !slices.Contains(found, l) {
			t.Errorf("fuzzTargets lists %s, which does not exist", l)
		}
	}
}

// lastProgress is the last "fuzz: elapsed: …" line of go test's output.
func lastProgress(out string) string {
	last := "no progress line"
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "fuzz: elapsed:") {
			last = strings.TrimPrefix(line, "fuzz: ")
		}
	}
	return last
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// crasherFiles lists the saved inputs of a fuzz target (what `go test -fuzz`
// writes under testdata/fuzz/<name>/ when an input fails).
func crasherFiles(t *testing.T, root, pkg, name string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, pkg, "testdata", "fuzz", name))
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("reading the corpus of %s: %v", name, err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// deadlineRaceOnly reports whether a failed fuzz run failed only with the
// coordinator's "context deadline exceeded" after making progress: no input
// was reported failing, no crasher file appeared and the target ran some
// inputs. Anything else is a real failure.
func deadlineRaceOnly(out string, before, after []string) bool {
	if !strings.Contains(out, "context deadline exceeded") ||
		strings.Contains(out, "Failing input written to") ||
		strings.Contains(out, "panic:") || !slices.Equal(before, after) {
		return false
	}
	var fails int
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "--- FAIL:") {
			fails++
		} else if strings.HasSuffix(line, ".go:") || strings.Contains(line, "_test.go:") {
			return false // a t.Error/t.Fatal message from the target itself
		}
	}
	return fails == 1 && regexp.MustCompile(`execs: [1-9]`).MatchString(out)
}

func TestDeadlineRaceOnly(t *testing.T) {
	race := "fuzz: elapsed: 3s, execs: 2004 (668/sec), new interesting: 5 (total: 114)\n" +
		"fuzz: elapsed: 11s, execs: 2142 (0/sec), new interesting: 5 (total: 114)\n" +
		"--- FAIL: FuzzKLTOps (11.06s)\n    context deadline exceeded\nFAIL\nexit status 1\n"
	crash := "fuzz: elapsed: 3s, execs: 2004 (668/sec), new interesting: 5 (total: 114)\n" +
		"--- FAIL: FuzzKLTOps (3.10s)\n    --- FAIL: FuzzKLTOps (0.00s)\n        klt_test.go:473: op 3: Len 2, model 1\n" +
		"    Failing input written to testdata/fuzz/FuzzKLTOps/abc\n    context deadline exceeded\nFAIL\n"
	tests := []struct {
		name          string
		out           string
		before, after []string
		want          bool
	}{
		{"deadline race after progress", race, []string{"a"}, []string{"a"}, true},
		{"reported crasher", crash, nil, []string{"abc"}, false},
		{"new corpus file without message", race, nil, []string{"abc"}, false},
		{"no progress", strings.ReplaceAll(race, "execs: 2", "execs: 0"), nil, nil, false},
		{"target's own failure", strings.Replace(race, "    context", "        klt_test.go:473: bad\n    context", 1), nil, nil, false},
		{"panic", race + "panic: boom\n", nil, nil, false},
		{"other failure", "--- FAIL: FuzzKLTOps (1s)\n    some error\nFAIL\n", nil, nil, false},
	}
	for _, tc := range tests {
		if got := deadlineRaceOnly(tc.out, tc.before, tc.after); got != tc.want {
			t.Errorf("%s: deadlineRaceOnly = %v, want %v", tc.name, got, tc.want)
		}
	}
}
