package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"koala/deploy/local"
	"koala/experiments/soak"
)

// newSoakCmd is `koala soak`: random reconfigurations and faults against
// the running local stack for --minutes, then the oracle's verdict.
func newSoakCmd() *cobra.Command {
	cfg := local.DefaultConfig()
	cfg.Controller = true
	cfg.Workers = 3
	var minutes float64
	var seed uint64
	var segment, idle time.Duration
	var protocols, results string
	cmd := &cobra.Command{
		Use:   "soak --minutes M --seed S",
		Short: "Chaos soak: random reconfigurations and faults on the local stack, then an exactness check of every output",
		Long: `soak runs, on the running local stack (same --home/--run-dir/port flags as
` + "`koala stack`" + `), three jobs with checkpoints — a keyed counter, a windowed
aggregate and a two-input join — in segments of --segment, one protocol per
segment (lazy, stop-and-restart, lazy fetch-on-demand, DRRS, remote). At
seeded random moments it starts reconfigurations (scale-out, scale-in,
rebalance, task migration, two operators at once) and injects faults (kill -9
a worker or the controller; restart NATS, Kafka or Temporal; SIGSTOP a worker
for a few seconds). It prints the plan, a live line every 5 s, and at the end
every event with its outcome and, per job, what the oracle found lost,
duplicated and reordered; writes a PNG of throughput and lag with the events
marked. It exits 1 unless every output is exact. The same seed gives the same
plan: rerun a failing seed to reproduce it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if minutes <= 0 {
				return fmt.Errorf("--minutes %g: must be > 0", minutes)
			}
			var ps []soak.Protocol
			for _, p := range splitList(protocols) {
				ps = append(ps, soak.Protocol(p))
			}
			c, err := prepStack(cfg)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("koala soak: own binary for the state server: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, err = soak.Run(ctx, soak.Config{
				Stack: c, Seed: seed, Duration: time.Duration(minutes * float64(time.Minute)), Segment: segment,
				Protocols: ps, ResultsDir: results, KoalaBinary: self, Out: cmd.OutOrStdout(), WindowIdleTimeout: idle,
			})
			return err
		},
	}
	f := cmd.Flags()
	addStackFlags(f, &cfg)
	f.Float64Var(&minutes, "minutes", 15, "length of the soak in minutes (input time of all segments)")
	f.Uint64Var(&seed, "seed", 1, "seed of the schedule: the same seed gives the same events at the same times")
	f.DurationVar(&segment, "segment", soak.DefaultSegment, "length of one segment's jobs; each segment runs one protocol")
	f.StringVar(&protocols, "protocols", "", "protocols to rotate through, comma-separated (default all: "+protocolList()+")")
	f.DurationVar(&idle, "window-idle-timeout", 0, "the window job's SourceIdleTimeoutMs (0: the runtime's default, 1s)")
	f.StringVar(&results, "results", "results", "directory for the soak's tables, result.json and plot")
	return cmd
}

func protocolList() string {
	var out []string
	for _, p := range soak.Rotation {
		out = append(out, string(p))
	}
	return strings.Join(out, ",")
}
