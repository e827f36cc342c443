package main

import (
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"koala/activities"
	"koala/dataplane/metrics"
	"koala/experiments/runner"
	"koala/workflows/autoscale"
)

func init() {
	var temporalAddr, namespace, job, operators string
	var follow bool
	pol := autoscale.DefaultPolicy()
	cmd := &cobra.Command{
		Use:   "autoscale --job WORKFLOW_ID [flags]",
		Short: "Autoscale a running experiment with DS2, rescaling through its reconfigure update",
		Long: "Starts the Autoscale workflow of a running experiment (workflow id WORKFLOW_ID-autoscaler). Every\n" +
			"--interval it reads each operator's true processing rate (records per busy second), the sources'\n" +
			"input rate and Kafka lag from ClickHouse, computes DS2's parallelism per operator and sends each change\n" +
			"as the experiment's \"reconfigure\" update (its ReconfigProtocol, e.g. lazy). It ends with the\n" +
			"experiment's input or when stopped: koala autoscale stop --job WORKFLOW_ID.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if operators != "" {
				pol.Operators = strings.Split(operators, ",")
			}
			tc, err := dialTemporal(cmd.Context(), temporalAddr, namespace)
			if err != nil {
				return err
			}
			defer tc.Close()
			run, err := runner.StartAutoscaler(cmd.Context(), tc, job, pol, os.Stdout)
			if err != nil || !follow {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runner.FollowAutoscaler(ctx, tc, run, 2*time.Second, os.Stdout)
		},
	}
	fl := cmd.PersistentFlags()
	fl.StringVar(&temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	fl.StringVar(&namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	fl.StringVar(&job, "job", "", "workflow id of the running experiment (as printed by koala run)")
	f := cmd.Flags()
	policyFlags(f, &pol)
	f.StringVar(&operators, "operators", "", "comma-separated operators to autoscale (default: every operator that is neither a source nor a sink)")
	f.BoolVar(&follow, "follow", false, "print the decisions as they are made until the autoscaler ends (Ctrl-C detaches)")
	cmd.AddCommand(&cobra.Command{
		Use: "status --job WORKFLOW_ID", Short: "Show the autoscaler's policy, last tick and last decisions", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withTemporal(cmd, temporalAddr, namespace, func(tc client.Client) error {
				return runner.AutoscalerStatus(cmd.Context(), tc, job, os.Stdout)
			})
		},
	}, &cobra.Command{
		Use: "stop --job WORKFLOW_ID", Short: "Stop (cancel) the autoscaler of a job", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withTemporal(cmd, temporalAddr, namespace, func(tc client.Client) error {
				return runner.StopAutoscaler(cmd.Context(), tc, job, os.Stdout)
			})
		},
	})
	rootCmd.AddCommand(cmd)
}

// policyFlags binds the policy's flags; their defaults are the policy's.
func policyFlags(f *pflag.FlagSet, p *autoscale.Policy) {
	f.Float64Var(&p.IntervalSeconds, "interval", p.IntervalSeconds, "seconds between two decisions")
	f.Float64Var(&p.WindowSeconds, "window", p.WindowSeconds, "seconds of metrics a decision is made from")
	f.Float64Var(&p.TargetUtilization, "target-utilization", p.TargetUtilization, "busy fraction each task is sized for, in (0, 1]")
	f.Float64Var(&p.CatchUpSeconds, "catch-up", p.CatchUpSeconds, "seconds within which the sources' Kafka lag is to be drained")
	f.Float64Var(&p.StabilizationSeconds, "stabilization", p.StabilizationSeconds, "seconds after a reconfiguration whose metrics are not used")
	f.Float64Var(&p.ScaleDownDelaySeconds, "scale-down-delay", p.ScaleDownDelaySeconds, "seconds DS2 must ask for fewer tasks before a scale-in")
	f.IntVar(&p.MinChange, "min-change", p.MinChange, "least change of parallelism, in tasks, worth a reconfiguration")
	f.IntVar(&p.MaxParallelism, "max-parallelism", p.MaxParallelism, "most tasks of an operator (0: NumBuckets)")
	f.Float64Var(&p.ReversalDrop, "reversal-drop", p.ReversalDrop, "an operator scaled out is scaled in only once its input fell by this fraction, in [0, 1)")
	f.StringVar(&p.Protocol, "protocol", "", "reconfiguration protocol; must be the job's ReconfigProtocol (an update runs the job's protocol)")
}

func withTemporal(cmd *cobra.Command, addr, namespace string, fn func(client.Client) error) error {
	tc, err := dialTemporal(cmd.Context(), addr, namespace)
	if err != nil {
		return err
	}
	defer tc.Close()
	return fn(tc)
}

// newAutoscalerActivities are the Autoscale workflow's activities of the
// controller: the job through tc, metrics and decisions in ClickHouse
// when it has one (without, every tick is skipped for lack of metrics).
func newAutoscalerActivities(tc client.Client, ch *metrics.ClickHouse, log *slog.Logger) *activities.Autoscaler {
	a := &activities.Autoscaler{Jobs: runner.TemporalJobs{Client: tc}, Logger: log}
	if ch != nil {
		a.Metrics, a.Decisions = ch, metrics.NewAutoscaleLog(ch)
	}
	return a
}
