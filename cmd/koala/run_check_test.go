package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// artifactScripts is the artifact-format testdata of package experiments.
const artifactScripts = "../../experiments/testdata/artifact-format/scripts"

// execute runs the koala command line with args. Cobra keeps flag values
// between runs, so every call names each flag it depends on.
func execute(args ...string) error {
	rootCmd.SetArgs(args)
	return rootCmd.Execute()
}

// TestCheckFlags runs `koala run --check` and `koala suite --check`: they
// start nothing (no Temporal is reachable here), exit without error on a
// good config or suite and report every problem otherwise.
func TestCheckFlags(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KOALA_HOME", home)
	noTemporal := []string{"--temporal", "127.0.0.1:1"}
	q4 := filepath.Join(artifactScripts, "nexmarkJson/q4/q4Lazy.json")
	q3 := filepath.Join(artifactScripts, "nexmarkJson/q3/q3Lazy.json")
	suite := filepath.Join(artifactScripts, "nsdi27/evaluation/SectionB/Cluster/fullSuite.json")

	run := func(scale, timeScale, mapHosts, config string) error {
		return execute(append([]string{"run", "--check", "--scale", scale, "--time-scale", timeScale, "--map-hosts=" + mapHosts, config}, noTemporal...)...)
	}
	if err := run("0.05", "0.25", "true", q4); err != nil {
		t.Fatalf("run --check of a good config: %v", err)
	}
	for _, tc := range []struct{ scale, timeScale, want string }{
		{"-1", "1", "--scale -1: must be a number > 0"},
		{"0", "1", "--scale 0: must be a number > 0"},
		{"1", "-0.5", "--time-scale -0.5: must be a number > 0"},
	} {
		if err := run(tc.scale, tc.timeScale, "true", q4); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--scale %s --time-scale %s: error %v, want %q", tc.scale, tc.timeScale, err, tc.want)
		}
	}
	err := run("1", "1", "false", q4)
	if err == nil || !strings.Contains(err.Error(), `field "InitialCustomTaskPlacement"`) || !strings.Contains(err.Error(), "host mapping is off") {
		t.Errorf("--map-hosts=false with the artifact's hosts: error %v, want the placement named", err)
	}
	err = run("1", "1", "true", q3)
	if err == nil || !strings.Contains(err.Error(), `field "WarmUpDataFolder": no warm-up snapshot`) || !strings.Contains(err.Error(), "q3WarmUp.json") {
		t.Errorf("run --check without the warm-up snapshot: error %v, want the field and the warm-up config", err)
	}

	checkSuite := func() error {
		return execute(append([]string{"suite", "--check", "--scale", "1", "--time-scale", "1", "--map-hosts=true", suite}, noTemporal...)...)
	}
	// Without the snapshots the suite runs the warm-up configs beside its
	// entries first (experiments/suite_warmup.go); `run --check` above
	// names the missing snapshot instead.
	if err := checkSuite(); err != nil {
		t.Errorf("suite --check without snapshots: %v (want the warm-ups found and run first)", err)
	}
	for _, dir := range []string{"warmups/q3/64_consistent", "warmups/q6mod/64_consistent"} {
		if err := os.MkdirAll(filepath.Join(home, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, dir, "manifest.json"), []byte(`{}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkSuite(); err != nil {
		t.Errorf("suite --check with the snapshots: %v", err)
	}
}
