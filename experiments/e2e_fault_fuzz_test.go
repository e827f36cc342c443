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
	{"./dataplane", "FuzzDecodeFrame", time.Minute},
	{"./dataplane", "FuzzDecodeList", 10 * time.Second},
	{"./dataplane/control", "FuzzDecodeEnvelope", time.Minute},
	{"./dataplane/control", "FuzzVerbOf", 10 * time.Second},
	{"./experiments", "FuzzParseConfig", time.Minute},
	{"./statesvc", "FuzzDecodeKLT", 10 * time.Second},
	{"./statesvc", "FuzzKLTOps", 10 * time.Second},
	{"./statesvc", "FuzzParseStateKey", 10 * time.Second},
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
			start := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
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
