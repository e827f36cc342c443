package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"koala/dataplane/transport"
	"koala/experiments"
	"koala/experiments/runner"
)

func init() {
	var temporalAddr, namespace, kafka, clickhouse, chNative, resultsDir, uiURL, attach, natsURL string
	var report string
	var every, gap, flushWait, margin time.Duration
	var prof profileFlags
	var natsSec transport.NATSSecurity
	var check bool
	var machine machineFlags
	cmd := &cobra.Command{
		Use:   "suite FILE | suite --attach SUITE-WORKFLOW-ID | suite --report DIR",
		Short: "Run a suite of experiments (a RunSuite workflow), follow it and print the artifact-style summary",
		Long: `suite loads the suite file (JSON {"Name", "Experiments": [{"Config", "Keyword"}]},
config paths relative to the file, or the Koala artifact's fullSuite.json form
with ConfigPath, ResultKeyword, CooldownSeconds, MaxAttempts, RetryDelaySeconds
and StopOnFailure) and every config it names, starts a
RunSuite workflow (id suite-NAME-TIMESTAMP) that runs the experiments one
after another as child RunExperiment workflows (ids SUITE-ID-INDEX-KEYWORD),
prints live progress (entry, elapsed, phase, source rate and Kafka lag), and
at the end writes RESULTS/suite_TIMESTAMP/summary.json, each entry's workflow
result and throughput plot, and prints the suite summary.

The suite runs in Temporal, not in this process: if this command dies, the
suite goes on; --attach SUITE-ID follows it again. A controller restart
neither loses nor repeats a finished experiment. Plot it with
'koala figures RESULTS/suite_TIMESTAMP'.

An entry whose config is not in the tree but on its "Branch" of the git
checkout the suite file lies in (the artifact keeps its DRRS, skew and
task-migration configs on branches) is read from that branch with
'git show', read-only, and noted. An entry that loads a warm-up snapshot
not built yet gets the warm-up config beside it (same directory, same
branch) run right before it, and noted.

A comparison suite (JSON {"Name", "Figures", "Comparisons": [{"Config",
"Protocols", "Overload", "ProbeFrom", "ProbeFactor", "ProbeMax",
"ProbeStepSeconds"}]}) runs 'koala compare' once per comparison instead,
from this process: each probes the rate its pre-scale pipeline sustains
(with Overload), runs every protocol at that multiple of it and starts its
own koala statesvc for remote. It writes RESULTS/suite_TIMESTAMP/ with one
compare-TIMESTAMP/ per comparison, summary.json (runs keyed lazy, SAR,
DRRS, Remote, for 'koala figures') and summary.md (the targets table).

--check loads and validates the suite and every config it names as a run
would, prints every problem and starts nothing. --scale and --time-scale
apply to every config (see README).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if attach != "" || report != "" {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if report != "" {
				if attach != "" || check {
					return fmt.Errorf("--report takes a comparison suite's result directory, not --attach or --check")
				}
				return runner.CompareSuiteReport(report)
			}
			if len(args) == 1 {
				if data, err := os.ReadFile(args[0]); err == nil && experiments.IsCompareSuite(data) {
					return runCompareSuite(cmd, args[0], check, compareSuiteFlags{
						temporalAddr: temporalAddr, namespace: namespace, kafka: kafka, clickhouse: clickhouse, chNative: chNative,
						resultsDir: resultsDir, uiURL: uiURL, natsURL: natsURL, natsSec: natsSec, gap: gap, flushWait: flushWait, margin: margin,
						prof: prof,
					})
				}
			}
			if prof.on {
				return fmt.Errorf("--profile applies to a comparison suite (one whose entries are Comparisons); %s is a plain suite", args[0])
			}
			o, err := machine.options()
			if err != nil {
				return err
			}
			if check {
				if attach != "" {
					return fmt.Errorf("--check takes a suite file, not --attach")
				}
				s, err := experiments.LoadSuiteFor(args[0], o)
				printNotes(s.Notes)
				if err != nil {
					return err
				}
				fmt.Printf("suite %s: OK (%s, %d experiment(s)); nothing started\n", args[0], s.Name, len(s.Input.Entries))
				return nil
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ch, err := clickHouseOrNil(clickhouse, chNative)
			if err != nil {
				return err
			}
			tc, err := dialTemporal(ctx, temporalAddr, namespace)
			if err != nil {
				return err
			}
			defer tc.Close()
			file := ""
			if len(args) > 0 {
				file = args[0]
			}
			return runner.Suite(ctx, runner.SuiteOptions{
				Services: runner.Services{Temporal: tc, ClickHouse: ch, Namespace: namespace, UIURL: uiURL, Brokers: splitList(kafka)},
				File:     file, Attach: attach, ResultsDir: resultsDir, Every: every, Run: o,
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&attach, "attach", "", "follow an already started RunSuite workflow instead of starting one")
	f.StringVar(&report, "report", "", "rewrite summary.md of the comparison suite run kept in this suite_TIMESTAMP directory from its compare.json files, running nothing")
	f.BoolVar(&check, "check", false, "load and validate the suite and every config it names, print every problem, and start nothing")
	machine.register(f)
	f.StringVar(&resultsDir, "results", "results", "directory under which suite_TIMESTAMP/ is written")
	f.DurationVar(&every, "every", 10*time.Second, "progress line interval")
	f.StringVar(&temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	f.StringVar(&namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	f.StringVar(&kafka, "kafka", envOr(envKafka, defKafka), "Kafka bootstrap brokers, comma-separated, used when a config names none (env "+envKafka+")")
	f.StringVar(&clickhouse, "clickhouse", envOr(envClickHouse, defClickHouse), "ClickHouse HTTP URL for live rates and lag, none to skip (env "+envClickHouse+")")
	clickHouseNativeFlag(f, &chNative)
	f.StringVar(&uiURL, "ui", envOr(envTemporalUI, defTemporalUI), "Temporal web UI base URL, for links (env "+envTemporalUI+")")
	f.StringVar(&natsURL, "nats", envOr(envNATS, defNATS), "NATS URL, for the progress of a warm-up a comparison builds first (env "+envNATS+")")
	addNATSSecurityFlags(f, &natsSec)
	addCompareTimingFlags(f, &gap, &flushWait, &margin)
	addProfileFlags(f, &prof)
	rootCmd.AddCommand(cmd)
}

// compareSuiteFlags are the suite command's flags a comparison suite uses.
type compareSuiteFlags struct {
	temporalAddr, namespace, kafka, clickhouse, chNative, resultsDir, uiURL, natsURL string
	natsSec                                                                          transport.NATSSecurity
	gap, flushWait, margin                                                           time.Duration
	prof                                                                             profileFlags
}

// runCompareSuite checks (--check) or runs the comparison suite at file.
func runCompareSuite(cmd *cobra.Command, file string, check bool, fl compareSuiteFlags) error {
	if check {
		s, err := runner.CheckCompareSuite(file)
		if err != nil {
			return err
		}
		fmt.Printf("suite %s: OK (%s, %d comparison(s)); nothing started\n", file, s.Name, len(s.Comparisons))
		return nil
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ch, err := clickHouseOrNil(fl.clickhouse, fl.chNative)
	if err != nil {
		return err
	}
	tc, err := dialTemporal(ctx, fl.temporalAddr, fl.namespace)
	if err != nil {
		return err
	}
	defer tc.Close()
	resolveNATSSecrets(&fl.natsSec)
	return runner.CompareSuite(ctx, runner.CompareSuiteOptions{
		Services: runner.Services{Temporal: tc, ClickHouse: ch, Namespace: fl.namespace, UIURL: fl.uiURL, Brokers: splitList(fl.kafka)},
		File:     file, ResultsDir: fl.resultsDir, Gap: fl.gap, FlushWait: fl.flushWait, Margin: fl.margin,
		DialNATS: func() (*nats.Conn, error) { return dialNATS(fl.natsURL, fl.natsSec, "koala-suite") },
		Profile:  fl.prof.options(),
	})
}
