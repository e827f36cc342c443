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
	st, err := stateSpec(o, out)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	spec := experiments.FormatStateSpec(st)
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
		fmt.Printf("[state] %d warm keys × %d B values, active %d: migrated %d B (active moved %d B, total state %d B, on disk %d B), build %.1f s, reconfig %.1f s, active %.1f s %s\n",
			p.WarmKeys, p.ValueBytes, p.ActiveKeys, p.BytesMigrated, p.ActiveMovedBytes, p.TotalStateBytes, p.DiskBytes, p.BuildSec, p.ReconfigSec, p.ActivePhaseSec, p.Error)
	}
	return res
}

// stateSpec checks the state phase's flags; errors name the flag.
func stateSpec(o benchOpts, out string) (experiments.StateSpec, error) {
	sizes, err := experiments.ParseByteSizes(o.stateSizes)
	if err != nil {
		return experiments.StateSpec{}, fmt.Errorf("--state-sizes %q: %w", o.stateSizes, err)
	}
	s := experiments.StateSpec{Sizes: sizes, ActiveKeys: o.stateActive, ValueBytes: o.stateValue, Out: out}
	switch {
	case o.stateValue < experiments.MinStateValueBytes || o.stateValue > experiments.MaxStateValueBytes:
		return s, fmt.Errorf("--state-value-bytes %d: want %d to %d (the 8-byte count and a pad)", o.stateValue, experiments.MinStateValueBytes, experiments.MaxStateValueBytes)
	case o.stateActive <= 0:
		return s, fmt.Errorf("--state-active-keys %d: must be a positive integer", o.stateActive)
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("--state-sizes %q with --state-value-bytes %d and --state-active-keys %d: %w", o.stateSizes, o.stateValue, o.stateActive, err)
	}
	return s, nil
}
