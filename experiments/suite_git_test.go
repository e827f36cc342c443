package experiments

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"koala/workflows/plan"
)

// gitRepo builds a git repository in a temporary directory: main holds an
// initial commit, and each extra branch adds files (path → contents) on
// top of it. It returns the repository's directory.
func gitRepo(t *testing.T, branches map[string]map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	// Neither the user's nor the system's git configuration applies.
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(t.TempDir(), "gitconfig"))
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q", "-b", "main")
	write(t, filepath.Join(dir, "README"), "configs live on branches\n")
	git("add", "README")
	git("commit", "-q", "-m", "main")
	for _, b := range sortedKeys(branches) {
		git("checkout", "-q", "-b", b, "main")
		for _, p := range sortedKeys(branches[b]) {
			write(t, filepath.Join(dir, p), branches[b][p])
			git("add", p)
		}
		git("commit", "-q", "-m", b)
	}
	git("checkout", "-q", "main")
	return dir
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// branchMeasure loads a snapshot and migrates a task; branchWarmUp builds
// that snapshot. Both are in the artifact's form.
const (
	branchMeasure = `{"QueryName": "counter", "WorkDir": "/srv/a", "TotalRuntimeSeconds": 100, "CounterParallelism": 2,
		"LoadWarmUpData": true, "WarmUpDataFolder": {"Pebble": "warm/counter"},
		"Reconfigurations": [{"TriggerTimeSeconds": 40, "Type": "task-migration", "TargetOperator": "counter", "TargetParrallelism": 2}]}`
	branchWarmUp = `{"QueryName": "counter", "WorkDir": "/srv/a", "TotalRuntimeSeconds": 50, "CounterParallelism": 2,
		"IsWarmUp": true, "WarmUpDataFolder": {"Pebble": "warm/counter"}}`
)

func suiteOf(entries ...string) string {
	return `{"WorkDir": "/srv/a", "Experiments": [` + strings.Join(entries, ",") + `]}`
}

func TestSuiteReadsConfigsFromBranches(t *testing.T) {
	t.Setenv("KOALA_HOME", t.TempDir())
	repo := gitRepo(t, map[string]map[string]string{
		"task_migration": {"scripts/q/measure.json": branchMeasure, "scripts/q/warmup.json": branchWarmUp},
		"other":          {"scripts/q/unrelated.json": `{}`},
	})
	// The suite lies in main's tree, several levels below scripts/, and is
	// not committed: only the configs must be on their branches.
	suite := filepath.Join(repo, "scripts", "eval", "S1", "fullSuite.json")
	entry := `{"Name": "tm", "Branch": "task_migration", "ConfigPath": "q/measure.json", "ResultKeyword": "task_migration"}`
	write(t, suite, suiteOf(entry))
	check := RunOptions{SkipEnvironment: true}

	t.Run("read from the branch", func(t *testing.T) {
		s, err := LoadSuiteFor(suite, check)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Entries) != 1 || s.Entries[0].Path != "task_migration:scripts/q/measure.json" {
			t.Fatalf("entries %+v, want one read from task_migration:scripts/q/measure.json", s.Entries)
		}
		rc := s.Input.Entries[0].Input.Reconfigurations
		if len(rc) != 2 || rc[0].Type != plan.KindTaskMigration || rc[0].TargetOperator != "counter" {
			t.Fatalf("reconfigurations %+v, want the two steps of a task migration of counter", rc)
		}
		notes := strings.Join(s.Notes, "\n")
		if !strings.Contains(notes, `Experiments[0] (tm): q/measure.json is not in the tree; read from branch "task_migration" of the git checkout (git show task_migration:scripts/q/measure.json)`) {
			t.Errorf("notes do not say where the config came from:\n%s", notes)
		}
	})

	t.Run("the warm-up beside it on the branch runs first", func(t *testing.T) {
		s, err := LoadSuiteFor(suite, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var kws []string
		for _, e := range s.Input.Entries {
			kws = append(kws, e.Keyword)
		}
		if strings.Join(kws, " ") != "warmup_warmup task_migration" || s.Entries[0].Path != "task_migration:scripts/q/warmup.json" {
			t.Fatalf("keywords %v, first from %s; want the warm-up from the branch, then the entry", kws, s.Entries[0].Path)
		}
		if w := s.Input.Entries[0].Input; w.Params["IsWarmUp"] != "true" {
			t.Errorf("first entry is not a warm-up: %v", w.Params)
		}
		if !strings.Contains(strings.Join(s.Notes, "\n"), "the suite runs its warm-up config task_migration:scripts/q/warmup.json first (keyword warmup_warmup)") {
			t.Errorf("notes do not name the warm-up:\n%s", strings.Join(s.Notes, "\n"))
		}
	})

	t.Run("a clone has the branch as remote-tracking only", func(t *testing.T) {
		clone := filepath.Join(t.TempDir(), "clone")
		if out, err := exec.Command("git", "clone", "-q", repo, clone).CombinedOutput(); err != nil {
			t.Fatalf("git clone: %v\n%s", err, out)
		}
		cs := filepath.Join(clone, "scripts", "eval", "S1", "fullSuite.json")
		write(t, cs, suiteOf(entry))
		if _, err := LoadSuiteFor(cs, check); err != nil {
			t.Fatal(err)
		}
	})

	for _, tc := range []struct {
		name, suite string
		want        []string
	}{
		{"unknown branch", suiteOf(`{"Branch": "nope", "ConfigPath": "q/measure.json", "ResultKeyword": "x"}`),
			[]string{`Experiments[0].ConfigPath: config file q/measure.json does not exist`, `the artifact keeps it on branch "nope"`, `has no branch "nope" (neither local nor remote-tracking`}},
		{"file not on the branch", suiteOf(`{"Branch": "other", "ConfigPath": "q/measure.json", "ResultKeyword": "x"}`),
			[]string{`branch "other" of the git checkout at`, `has no such file either`}},
		{"the branch checked out", suiteOf(`{"Branch": "main", "ConfigPath": "q/measure.json", "ResultKeyword": "x"}`),
			[]string{`branch "main" is the one checked out at`}},
		{"not a branch name", suiteOf(`{"Branch": "--output=x", "ConfigPath": "q/measure.json", "ResultKeyword": "x"}`),
			[]string{`branch "--output=x" is not a branch name`}},
		{"no branch given", suiteOf(`{"ConfigPath": "q/measure.json", "ResultKeyword": "x"}`),
			[]string{`config file q/measure.json does not exist`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(repo, "scripts", "eval", "S2", strings.ReplaceAll(tc.name, " ", "_")+".json")
			write(t, p, tc.suite)
			_, err := LoadSuiteFor(p, check)
			wantErrIn(t, err, tc.want...)
		})
	}
}

// Outside a git checkout the entry fails as before, with the hint.
func TestSuiteBranchOutsideCheckout(t *testing.T) {
	t.Setenv("GIT_CEILING_DIRECTORIES", os.TempDir()) // a checkout above the temp dir does not count
	dir := t.TempDir()
	p := filepath.Join(dir, "scripts", "eval", "fullSuite.json")
	write(t, p, suiteOf(`{"Branch": "task_migration", "ConfigPath": "q/measure.json", "ResultKeyword": "x"}`))
	_, err := LoadSuiteFor(p, RunOptions{SkipEnvironment: true})
	wantErrIn(t, err, "the artifact keeps it on branch \"task_migration\"", "the suite file is not inside a git checkout",
		"git -C <artifact checkout> show task_migration:scripts/q/measure.json")
}

// A suite entry that loads a snapshot nobody built gets the warm-up config
// beside it run first (once, however many entries load it); without one,
// the entry fails naming the field.
func TestSuiteRunsMissingWarmUpsFirst(t *testing.T) {
	t.Setenv("KOALA_HOME", t.TempDir())
	dir := t.TempDir()
	write(t, filepath.Join(dir, "q", "measure.json"), branchMeasure)
	write(t, filepath.Join(dir, "q", "warmup.json"), branchWarmUp)
	write(t, filepath.Join(dir, "lone", "measure.json"), branchMeasure)
	p := filepath.Join(dir, "suite.json")
	write(t, p, `{"Experiments": [{"Config": "q/measure.json", "Keyword": "a"}, {"Config": "q/measure.json", "Keyword": "b"}]}`)
	s, err := LoadSuiteFor(p, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kws []string
	for _, e := range s.Input.Entries {
		kws = append(kws, e.Keyword)
	}
	if strings.Join(kws, " ") != "warmup_warmup a b" {
		t.Fatalf("keywords %v, want the warm-up once, first", kws)
	}
	if _, err := LoadSuite(p); err != nil {
		t.Fatal(err)
	} else if s, _ := LoadSuite(p); len(s.Input.Entries) != 2 {
		t.Errorf("LoadSuite (no environment) has %d entries, want the file's 2", len(s.Input.Entries))
	}
	lone := filepath.Join(dir, "lone.json")
	write(t, lone, `{"Experiments": [{"Config": "lone/measure.json", "Keyword": "a"}]}`)
	_, err = LoadSuiteFor(lone, RunOptions{})
	wantErrIn(t, err, `field "WarmUpDataFolder": no warm-up snapshot at`, "build it first with `koala run` of the config with IsWarmUp true")
}
