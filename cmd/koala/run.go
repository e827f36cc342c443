package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"koala/experiments"
	"koala/experiments/runner"
)

func init() {
	var temporalAddr, namespace, kafka, id, resultsDir, uiURL string
	var detach, printInput, check bool
	var machine machineFlags
	cmd := &cobra.Command{
		Use:   "run CONFIG.json",
		Short: "Start an experiment workflow, follow it, print its summary and write its plot",
		Long: `run parses the config (koala's fields or the Koala artifact's, unchanged),
prepares it for this machine and starts a RunExperiment workflow.

--check parses and validates the config as a run would (query and operators,
hosts, trace files, warm-up snapshot) and prints every problem, starting
nothing. --scale and --time-scale shrink a cluster-sized config (see README).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := machine.options()
			if err != nil {
				return err
			}
			if printInput {
				// The workflow input, for `temporal workflow start --input`:
				// parsed and scaled, not checked against this machine.
				data, err := os.ReadFile(args[0])
				if err != nil {
					return fmt.Errorf("config: %w", err)
				}
				in, notes, err := experiments.ParseConfigNotes(args[0], data)
				if err != nil {
					return err
				}
				printNotes(notes)
				if note, err := o.Scale.Apply(&in); err != nil {
					return err
				} else if note != "" {
					printNotes([]string{note})
				}
				if len(in.KafkaBrokers) == 0 {
					in.KafkaBrokers = splitList(kafka)
				}
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(in)
			}
			// Before anything is started: the workflow would reject most
			// of this too, but only once it runs.
			in, notes, err := experiments.PrepareConfig(args[0], o)
			printNotes(notes)
			if err != nil {
				return err
			}
			if check {
				fmt.Printf("config %s: OK (query %s, %d s, %d reconfiguration(s)); nothing started\n", args[0], in.QueryName, in.TotalRuntimeSeconds, len(in.Reconfigurations))
				return nil
			}
			if len(in.KafkaBrokers) == 0 {
				in.KafkaBrokers = splitList(kafka)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tc, err := dialTemporal(ctx, temporalAddr, namespace)
			if err != nil {
				return err
			}
			defer tc.Close()
			return runner.Run(ctx, runner.RunOptions{
				Services: runner.Services{Temporal: tc, Namespace: namespace, UIURL: uiURL},
				Input:    in, ID: id, ResultsDir: resultsDir, Detach: detach,
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	f.StringVar(&namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	f.StringVar(&kafka, "kafka", envOr(envKafka, defKafka), "Kafka bootstrap brokers, comma-separated, used when the config names none (env "+envKafka+")")
	f.StringVar(&id, "id", "", "workflow id (default NAME-YYYYMMDD-HHMMSS)")
	f.StringVar(&resultsDir, "results", "results", "directory for summaries and plots")
	f.StringVar(&uiURL, "ui", envOr(envTemporalUI, defTemporalUI), "Temporal web UI base URL, for links (env "+envTemporalUI+")")
	f.BoolVar(&detach, "detach", false, "start the workflow and return without following it")
	f.BoolVar(&printInput, "print-input", false, "print the RunExperiment workflow input as JSON (for the Temporal CLI or UI) and exit")
	f.BoolVar(&check, "check", false, "parse and validate the config as a run would, print every problem, and start nothing")
	machine.register(f)
	rootCmd.AddCommand(cmd)
}

// machineFlags are the flags of run and suite that fit a config to this
// machine (experiments.RunOptions).
type machineFlags struct {
	scale, timeScale float64
	mapHosts         bool
	stackHosts       string
}

func (m *machineFlags) register(f *pflag.FlagSet) {
	f.Float64Var(&m.scale, "scale", 1, "multiply every rate, key space, event count and state size of the config(s) by this factor (> 0)")
	f.Float64Var(&m.timeScale, "time-scale", 1, "multiply TotalRuntimeSeconds, trigger times and rate-change intervals (and a suite's cool-downs) by this factor (> 0)")
	f.BoolVar(&m.mapHosts, "map-hosts", true, "map the config's host lists (WorkerIPs, ProducerIPs, InitialCustomTaskPlacement) onto the stack's workers; false: they must name the stack's hosts")
	f.StringVar(&m.stackHosts, "stack-hosts", strings.Join(experiments.LocalHosts(), ","), "the stack's hosts, comma-separated, for --map-hosts=false")
}

func (m *machineFlags) options() (experiments.RunOptions, error) {
	s := experiments.Scale{Factor: m.scale, Time: m.timeScale}
	if err := s.CheckSet(); err != nil {
		return experiments.RunOptions{}, err
	}
	return experiments.RunOptions{Scale: s, NoHostMapping: !m.mapHosts, StackHosts: splitList(m.stackHosts)}, nil
}

// printNotes prints a config's or suite's notes on stderr, one a line.
func printNotes(notes []string) {
	for _, n := range notes {
		fmt.Fprintln(os.Stderr, "note:", n)
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
