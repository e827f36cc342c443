package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"koala/experiments"
	"koala/experiments/runner"
)

// benchDisruption probes the rate the disruption config's pipeline
// sustains (probe.go), then runs the protocol comparison with the compare
// machinery at DisruptionShare of it, starting a remote state server for
// the remote protocol.
func benchDisruption(ctx context.Context, e steadyEnv, notes *[]string) (*experiments.Comparison, *runner.RateProbe, string, error) {
	o, tc, ch, stamp := e.o, e.tc, e.ch, e.stamp
	variants, err := experiments.ParseVariants(o.Protocols)
	if err != nil {
		return nil, nil, "", err
	}
	base, err := experiments.LoadConfig(o.DisruptionConfig)
	if err != nil {
		return nil, nil, "", err
	}
	runner.DefaultBrokers(&base, o.Kafka)
	if _, ok := base.Params["RateLimiterConfig"]; ok {
		// The probe and the runs set the rate; a schedule would override it.
		delete(base.Params, "RateLimiterConfig")
		*notes = append(*notes, "disruption: the config's RateLimiterConfig was left out; the runs offer the probed rate")
	}
	rates, err := runner.ProbeRates(o.ProbeFrom, o.ProbeFactor, o.ProbeMax)
	if err != nil {
		return nil, nil, "", fmt.Errorf("--probe-from/--probe-factor/--probe-max: %w", err)
	}
	probe := runner.Probe(ctx, runner.Services{Temporal: e.tc, ClickHouse: e.ch, Namespace: o.Namespace, UIURL: o.UIURL}, base, rates, o.ProbeStepSec, runner.ProbeRun{
		Config: o.DisruptionConfig, Stamp: stamp, Label: "[disruption probe]", ResultsDir: o.ResultsDir, FlushWait: o.FlushWait, Margin: o.Margin, Terminator: "koala bench",
	})
	probe.SetRunRate(DisruptionShare, base.Producer.RatePerSec)
	if probe.Error != "" {
		fmt.Printf("disruption: probe: %s; the protocols run at the config's %d ev/s\n", probe.Error, probe.RunRate)
	} else {
		fmt.Printf("disruption: probed sustainable rate %d ev/s (%s); the protocols run at %.0f %% of it, %d ev/s\n", probe.Sustainable, probe.Limit, 100*DisruptionShare, probe.RunRate)
	}
	base.Producer.RatePerSec = probe.RunRate
	if ctx.Err() != nil {
		return nil, &probe, "", ctx.Err()
	}
	runner.Sleep(ctx, o.Gap)
	dir := filepath.Join(o.ResultsDir, "compare-"+stamp)
	cmp := &experiments.Comparison{Experiment: base.Name, Config: o.DisruptionConfig, Started: time.Now()}
	remote := ""
	var svc *runner.StateServer
	var svcNote error
	for i, v := range variants {
		if ctx.Err() != nil {
			break
		}
		if i > 0 {
			runner.Sleep(ctx, o.Gap)
		}
		if v == experiments.VariantRemote && o.StatesvcAddr != "" && svc == nil {
			var addr string
			svc, addr, svcNote = startStateSvc(ctx, o.StatesvcBinary, o.StatesvcAddr)
			if svcNote == nil {
				remote = addr
				if addr != o.StatesvcAddr {
					*notes = append(*notes, fmt.Sprintf("remote protocol: %s was held by another process (left alone), so the harness ran its own koala statesvc on %s", o.StatesvcAddr, addr))
				}
			} else {
				fmt.Println("disruption: remote state server:", svcNote)
			}
		}
		label := fmt.Sprintf("[disruption %d/%d %s]", i+1, len(variants), v)
		row := runner.RunVariant(ctx, runner.Services{Temporal: tc, ClickHouse: ch, Namespace: o.Namespace, UIURL: o.UIURL}, runner.VariantRun{
			Base: base, Variant: v, RemotePebble: remote, Stamp: stamp, Label: label, Dir: dir, FlushWait: o.FlushWait, Margin: o.Margin, Terminator: "koala compare",
		})
		if v == experiments.VariantRemote && svcNote != nil && row.Status == experiments.StatusSkipped {
			row.Reason += " (starting koala statesvc failed: " + svcNote.Error() + ")"
		}
		cmp.Rows = append(cmp.Rows, row)
		if v == experiments.VariantRemote && svc != nil {
			stopStateSvc(svc)
			svc = nil
		}
	}
	if svc != nil {
		stopStateSvc(svc)
	}
	fmt.Println()
	_ = cmp.WriteTable(os.Stdout)
	if _, err := cmp.WriteFiles(dir); err != nil {
		return cmp, &probe, dir, err
	}
	return cmp, &probe, dir, nil
}

// startStateSvc starts `koala statesvc` (self, or this binary when empty)
// on addr, or on a free port when another process holds addr.
func startStateSvc(ctx context.Context, self, addr string) (*runner.StateServer, string, error) {
	svc, err := runner.StartStateServer(ctx, self, addr, "")
	if err != nil {
		return nil, "", err
	}
	if svc.Moved {
		fmt.Printf("disruption: %s is in use by another process (left alone); our own state server is on %s\n", addr, svc.Addr)
	}
	fmt.Printf("disruption: started koala statesvc pid %d on %s\n", svc.PID(), svc.Addr)
	return svc, svc.Addr, nil
}

// stopStateSvc stops the state server we started, by its PID, and removes
// its directory.
func stopStateSvc(svc *runner.StateServer) {
	if svc == nil {
		return
	}
	pid := svc.PID()
	svc.Stop()
	fmt.Printf("disruption: stopped koala statesvc pid %d\n", pid)
}

// DisruptionShare is the share of the probed rate the protocols run at.
const DisruptionShare = 0.7
