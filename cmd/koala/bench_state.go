package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"koala/experiments"
)

// benchState runs the scaling-with-state phase: TestBenchStateScaling in
// go test (an in-process cluster; see experiments/bench_state.go), with the
// sizes passed through experiments.EnvBenchState, and reads its JSON.
func benchState(ctx context.Context, o benchOpts) experiments.StateScaling {
	var res experiments.StateScaling
	goBin, err := exec.LookPath(envOr("GO", "go"))
	if err != nil {
		res.Error = "go toolchain not on PATH: state phase skipped"
		return res
	}
	warm, err := parseInts(o.stateWarm)
	if err != nil {
		res.Error = "--state-warm-keys: " + err.Error()
		return res
	}
	if err := os.MkdirAll(o.resultsDir, 0o755); err != nil {
		res.Error = err.Error()
		return res
	}
	out, err := filepath.Abs(filepath.Join(o.resultsDir, "state-scaling.json"))
	if err != nil {
		res.Error = err.Error()
		return res
	}
	_ = os.Remove(out)
	spec := experiments.FormatStateSpec(warm, o.stateActive, out)
	if _, _, _, err := experiments.ParseStateSpec(spec); err != nil {
		res.Error = err.Error()
		return res
	}
	args := []string{"test", "-count=1", "-run", "^TestBenchStateScaling$", "-v", "-timeout", "40m", "./experiments"}
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Env = append(os.Environ(), experiments.EnvBenchState+"="+spec)
	command := experiments.EnvBenchState + "=" + spec + " go " + strings.Join(quoteArgs(args), " ")
	fmt.Println("state:", command)
	logOut, runErr := cmd.CombinedOutput()
	_ = os.WriteFile(filepath.Join(o.resultsDir, "state-scaling.log"), logOut, 0o644)
	data, err := os.ReadFile(out)
	if err != nil {
		res.Command = command
		res.Error = fmt.Sprintf("no result (%v): %v: %s", err, runErr, lastLines(string(logOut), 5))
		return res
	}
	if err := json.Unmarshal(data, &res); err != nil {
		res.Error = "decode " + out + ": " + err.Error()
	}
	res.Command = command
	if runErr != nil && res.Error == "" {
		res.Error = fmt.Sprintf("go test: %v: %s", runErr, lastLines(string(logOut), 5))
	}
	for _, p := range res.Points {
		fmt.Printf("[state] warm %d active %d: migrated %d B (active moved %d B, total state %d B), build %.1f s, reconfig %.1f s, active %.1f s %s\n",
			p.WarmKeys, p.ActiveKeys, p.BytesMigrated, p.ActiveMovedBytes, p.TotalStateBytes, p.BuildSec, p.ReconfigSec, p.ActivePhaseSec, p.Error)
	}
	return res
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty")
	}
	return out, nil
}
