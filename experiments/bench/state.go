package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// benchState runs the scaling-with-state phase in this process (see
// state_measure.go) and keeps its result as <results>/state-scaling.json and
// the cluster's log as state-scaling.log.
func benchState(ctx context.Context, o Options) StateScaling {
	var res StateScaling
	if err := os.MkdirAll(o.ResultsDir, 0o755); err != nil {
		res.Error = err.Error()
		return res
	}
	out := filepath.Join(o.ResultsDir, "state-scaling.json")
	_ = os.Remove(out)
	st, err := stateSpec(o)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	logPath := filepath.Join(o.ResultsDir, "state-scaling.log")
	logf, err := os.Create(logPath)
	if err != nil {
		res.Error = fmt.Sprintf("state log: %v", err)
		return res
	}
	defer logf.Close()
	command := fmt.Sprintf("koala bench --phases state --state-sizes %s --state-value-bytes %d --state-active-keys %d", o.StateSizes, o.StateValueBytes, o.StateActiveKeys)
	fmt.Println("state:", command, "(in-process cluster; log", logPath+")")
	// The bound the go test run of this phase had, so a stuck point cannot
	// hold the rest of the bench.
	ctx, cancel := context.WithTimeout(ctx, 40*time.Minute)
	defer cancel()
	res = MeasureStateScaling(ctx, st, slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	res.Command = command
	if err := ctx.Err(); err != nil && res.Error == "" {
		res.Error = fmt.Sprintf("state phase stopped after %d of %d sizes: %v", len(res.Points), len(st.Sizes), err)
	}
	if data, err := json.MarshalIndent(res, "", "  "); err != nil {
		res.Error = "encode " + out + ": " + err.Error()
	} else if err := os.WriteFile(out, data, 0o644); err != nil {
		res.Error = err.Error()
	}
	for _, p := range res.Points {
		fmt.Printf("[state] %d warm keys × %d B values, active %d: migrated %d B (active moved %d B, total state %d B, on disk %d B), build %.1f s, reconfig %.1f s, active %.1f s %s\n",
			p.WarmKeys, p.ValueBytes, p.ActiveKeys, p.BytesMigrated, p.ActiveMovedBytes, p.TotalStateBytes, p.DiskBytes, p.BuildSec, p.ReconfigSec, p.ActivePhaseSec, p.Error)
	}
	return res
}

// stateSpec checks the state phase's flags; errors name the flag.
func stateSpec(o Options) (StateSpec, error) {
	sizes, err := ParseByteSizes(o.StateSizes)
	if err != nil {
		return StateSpec{}, fmt.Errorf("--state-sizes %q: %w", o.StateSizes, err)
	}
	s := StateSpec{Sizes: sizes, ActiveKeys: o.StateActiveKeys, ValueBytes: o.StateValueBytes}
	switch {
	case o.StateValueBytes < MinStateValueBytes || o.StateValueBytes > MaxStateValueBytes:
		return s, fmt.Errorf("--state-value-bytes %d: want %d to %d (the 8-byte count and a pad)", o.StateValueBytes, MinStateValueBytes, MaxStateValueBytes)
	case o.StateActiveKeys <= 0:
		return s, fmt.Errorf("--state-active-keys %d: must be a positive integer", o.StateActiveKeys)
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("--state-sizes %q with --state-value-bytes %d and --state-active-keys %d: %w", o.StateSizes, o.StateValueBytes, o.StateActiveKeys, err)
	}
	return s, nil
}
