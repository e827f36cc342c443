package bench

import (
	"fmt"
	"strings"

	"koala/experiments"
	"koala/experiments/runner"
)

// The steady-state and large-state rows in the report: their targets and
// their tables.

// findRow is the run of the named row, if it ran.
func (r BenchReport) findRow(name string) (Steady, bool) {
	for _, s := range r.Steady {
		if s.Row == name {
			return s, true
		}
	}
	return Steady{}, false
}

// rowTargets are the targets of the headline rows, in row order; a row
// that did not run is not measured. Tuned rows have none.
func (r BenchReport) rowTargets() []TargetRow {
	var out []TargetRow
	for _, row := range allRows(Options{}) {
		if row.Tuned != "" {
			continue
		}
		src := row.Phase + " " + row.Name
		s, ran := r.findRow(row.Name)
		if row.PerCore > 0 {
			t := TargetRow{Target: row.PerCoreTarget, Source: src, Verdict: VerdictUnknown}
			switch v, why := s.PerCoreVerdict(); {
			case !ran:
				t.Measured = notRunText(row)
			case why != "":
				t.Measured = "not measured: " + why + s.perCoreFigure()
			default:
				t.Verdict = v
				t.Measured = strings.TrimPrefix(s.perCoreFigure(), "; ") + "; " + s.conditionsText()
			}
			out = append(out, t)
		}
		if row.Sustained > 0 {
			t := TargetRow{Target: row.SustainedTarget, Source: src, Verdict: VerdictUnknown}
			switch v, why := s.SustainedVerdict(); {
			case !ran:
				t.Measured = notRunText(row)
			case why != "":
				t.Measured = "not measured: " + why + s.sustainedFigure()
			default:
				t.Verdict = v
				t.Measured = strings.TrimPrefix(s.sustainedFigure(), "; ") + "; " + s.conditionsText()
			}
			out = append(out, t)
		}
	}
	return out
}

func notRunText(row Row) string {
	return fmt.Sprintf("n/a: row %s not run (phase %s not selected, or left out by --rows)", row.Name, row.Phase)
}

// perCoreFigure is "; <per-core figure>", empty without one.
func (s Steady) perCoreFigure() string {
	if s.Status != experiments.StatusOK || s.EventsPerCPUSec <= 0 {
		return ""
	}
	return fmt.Sprintf("; %.0f %s per worker CPU-s (%.0f %s/s at %s on %.2f worker cores)", s.EventsPerCPUSec, s.unit(), s.EventsPerSec, s.unit(), s.CountedAt, s.CoresUsed)
}

// sustainedFigure is "; <offered, produced, counted and lag>", empty
// without a completed run.
func (s Steady) sustainedFigure() string {
	if s.Status != experiments.StatusOK {
		return ""
	}
	return fmt.Sprintf("; offered %d %s/s, produced %.0f/s, %.0f/s at %s over the window; Kafka lag %s", s.Rate, s.unit(), s.ProducedPerSec, s.EventsPerSec, s.CountedAt, s.lagText())
}

// steadyMarkdown is the section of the rows of phase.
func (r BenchReport) steadyMarkdown(phase string) string {
	var rows []Steady
	for _, s := range r.Steady {
		if s.Phase == phase || (s.Phase == "" && phase == PhaseSteady) {
			rows = append(rows, s)
		}
	}
	var b strings.Builder
	if phase == PhaseLargeState {
		b.WriteString("\n\n## Large state (q6* over ≥ 2 GB)\n\n")
		if len(rows) == 0 {
			b.WriteString("Not run.\n")
			return b.String()
		}
		b.WriteString("Each row first runs its warm-up config (`IsWarmUp`: the closed-auction stream with one new seller per auction, `WarmupRun`, as fast as the pipeline takes it) and snapshots its stateful tasks (Pebble checkpoints, each taken once its store finished the compactions the warm-up left pending and was then compacted whole with its values rewritten in key order, at most 3 min for both: EXPERIMENTS.md, \"Settled snapshots\" and \"Compacted snapshots\"; rows measured before 7bff907 started from uncompacted snapshots, whose first compactions in the window rewrote the warm-up's values once); the measured run loads that snapshot before its tasks start and then offers closed auctions whose sellers are drawn uniformly from all the warm-up's sellers, so reads spread over the whole state. " +
			"*state* is what the job's data directories on the task workers held when the window opened (Pebble sstables and logs, `<run-dir>/worker-<id>/<job>/`) and how many of the window's state lookups the tasks' value caches answered (their counters, read over NATS each second). " +
			"A row's targets are judged only if that state is at least 2 GB, at least 4 × the value caches, and the caches answered at most a quarter of the lookups; otherwise they are *not measured*, with the reason. " +
			"The operating system's page cache may still hold the sstables (this machine's RAM exceeds the state); beyond memory here means beyond the process's value cache. Columns as in *Steady state per core*.\n\n")
	} else {
		b.WriteString("\n## Steady state per core\n\n")
		b.WriteString("Each row ran its query without reconfiguration at a fixed producer rate through a `RunExperiment` workflow on the local stack. " +
			"Headline rows run as a user gets them (round-robin task placement, the source's default fetch sizes); a row marked *tuned* changes that (named in its verdict cell) and is never judged. " +
			"Events/s are the `records_in` of the counting operator (the sink, or the operator marked *) from ClickHouse over the window; CPU-seconds are utime+stime from `/proc/<pid>/stat` of the worker processes that host the query's tasks (`<run-dir>/worker-w*.pid`), sampled every 0.5 s and interpolated at the window's bounds. " +
			"The producers (Kafka clients generating the input, standing in for the original artifact's producer machines) run on a worker that hosts no task (the config's `ProducerWorkers`, by default the stack's last worker): its CPU is not counted against the pipeline but shown in *producer cores* over the same window. " +
			"A run whose producers shared the task workers (*in worker CPU*, e.g. a single-worker stack) counts their CPU in the worker CPU-s. " +
			"*placement* is the first deployment's (round robin spreads consecutive operators over workers; co-locate puts task i of every operator on one worker, so records pass in memory instead of through the gRPC exchange) with the source's and the counting operator's tasks; *fetch* the source's Kafka fetch size (SourceFetchMinBytes) and longest wait (SourceFetchMaxWaitMs). " +
			"*state* is the job's data on the task workers' disks when the window opened and the share of the window's state lookups the value caches answered. " +
			"*sustained* says whether the source's Kafka lag (produced minus processed, records read ahead but not yet processed included) grew by less than one second of the offered rate over the window (least-squares slope × window length, the growth in records in brackets). " +
			"Kafka, ClickHouse, Temporal and NATS are not counted; *machine cores busy* is the whole machine's busy CPU (/proc/stat) over the same window. " +
			"*batch p50 / p99* are the processing time of individual batches of the named operator, from the HDR histograms (1 µs – 10 min, 3 significant digits) every task writes each second (`batch_time_hdr`), merged over the window. " +
			"*e2e* is producer → sink latency per record (HDR, whole job, warm-up and drain included, producer batching and Kafka included); with several sink tasks the largest of each percentile; not reported for queries whose sink gets results rather than input records.\n\n")
	}
	b.WriteString("| row | query | placement | fetch | state | offered | produced/s | counted/s (or *) | sustained (lag growth) | worker CPU-s | worker cores | producer cores | machine cores busy | per worker CPU-s | target | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range rows {
		if s.Status != experiments.StatusOK {
			fmt.Fprintf(&b, "| %s | %s | %s: %s |||||||||||||| \n", s.label(), s.Query, s.Status, esc(s.Reason))
			continue
		}
		target, v := "—", VerdictUnknown
		if s.Target > 0 {
			target = fmt.Sprintf("%.0f", s.Target)
		}
		switch verdict, why := s.PerCoreVerdict(); {
		case s.Tuned != "":
			v = "— (" + s.Tuned + ")"
		case why != "" && s.Target > 0:
			v = VerdictUnknown + ": " + why
		default:
			v = verdict
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d | %.0f | %s | %s | %.1f | %.2f | %s | %.2f | %.0f | %s | %s |\n",
			s.label(), s.Query, s.placementText(), s.fetchText(), esc(s.stateText()), s.Rate, s.ProducedPerSec, s.eventsText(), s.sustainedCell(),
			s.CPUSeconds, s.CoresUsed, s.producerText(), s.MachineCores, s.EventsPerCPUSec, target, esc(v))
	}
	b.WriteString("\n| row | operator | batch p50 (HDR) | batch p99 (HDR) | e2e p50 / p99 / p999 / max | Kafka lag at start → end (max) | lost | dup |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range rows {
		if s.Status != experiments.StatusOK {
			continue
		}
		lost, dup := fmt.Sprint(s.Lost), fmt.Sprint(s.Duplicated)
		if s.ExactnessUnchecked != "" {
			lost, dup = "unchecked", "unchecked"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.0f → %.0f (%.0f) | %s | %s |\n",
			s.label(), s.Operator, s.batchText(s.BatchP50Us), s.batchText(s.BatchP99Us), s.E2EText(), s.StartLag, s.EndLag, s.MaxLag, lost, dup)
	}
	for _, s := range rows {
		if s.Status != experiments.StatusOK {
			continue
		}
		fmt.Fprintf(&b, "\n- %s: workflow `%s`, window [%.0f s, %.0f s) of the job, %d batches of %s (longest %s).", s.label(), s.WorkflowID, s.WindowFrom, s.WindowTo, s.BatchCount, s.Operator, s.batchText(s.BatchMaxUs))
		if len(s.ProducerWorkers) > 0 {
			fmt.Fprintf(&b, " Producers on %s: %.1f CPU-s (%.2f cores) over the window, not in the worker CPU-s; with them the pipeline and its input generator took %.0f %s per CPU-s.",
				strings.Join(s.ProducerWorkers, ", "), s.ProducerCPUSeconds, s.ProducerCores, s.perCPUWithProducers(), s.unit())
		}
		if w := s.WarmUp; w != nil {
			fmt.Fprintf(&b, " State built by `%s` (workflow `%s`): %d records, %d keys, %s of checkpoint, in %.0f s.", w.Config, w.WorkflowID, w.Events, w.Keys, experiments.BytesText(float64(w.Bytes)), w.Seconds)
		}
		if !s.State.CacheOK && s.MinStateBytes > 0 {
			fmt.Fprintf(&b, " Value caches: %s.", esc(s.State.CacheErr))
		}
		if s.BatchError != "" {
			fmt.Fprintf(&b, " Batch histograms: %s.", esc(s.BatchError))
		}
	}
	if phase == PhaseSteady {
		b.WriteString("\n\nFor queries that do not deliver every source record to the sink (aggregations such as nexmark-q5's sliding-window count), events/s are the `records_in` of the operator marked * (the aggregation's input: one per input event), since its sink receives window results; and `lost`/`dup` are *unchecked*: the run's sink ledger counts source records reaching the sink, which such a query does not deliver one to one (the query declares this; its oracle tests check it instead).\n")
	} else {
		b.WriteString("\n")
	}
	return b.String()
}

// probeMarkdown is the disruption phase's rate probe.
func (r BenchReport) probeMarkdown() string {
	p := r.Probe
	if p == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Rate: one run of `%s` without its reconfiguration (workflow `%s`) offered a staircase of rates, %d s per step; a step is sustained when the source's Kafka lag grew by at most max(%.2f s of its rate, %d batches) over its last %d s and, the lag flat, the sink counted at least %.0f %% of the rate (else the producers fell short). ",
		p.Config, p.WorkflowID, p.StepSec, runner.ProbeLagSec, runner.ProbeLagMinBatches, p.StepSec-runner.ProbeSettleSec, 100*runner.ProbeProducedShare)
	if p.Error != "" {
		fmt.Fprintf(&b, "**The probe found no rate** (%s), so the protocols ran at the config's %d ev/s.\n\n", esc(p.Error), p.RunRate)
	} else {
		fmt.Fprintf(&b, "Probed sustainable rate **%d ev/s** (%s); the protocols ran at %.0f %% of it, **%d ev/s**.\n\n", p.Sustainable, esc(p.Limit), 100*DisruptionShare, p.RunRate)
	}
	if len(p.Steps) > 0 {
		b.WriteString("| offered ev/s | measured part of the job | sink ev/s | lag growth | step |\n|---|---|---|---|---|\n")
		for _, st := range p.Steps {
			fmt.Fprintf(&b, "| %d | [%.0f s, %.0f s) | %.0f | %+.0f | %s |\n", st.Rate, st.FromSec, st.ToSec, st.Counted, st.LagGrowth, st.Verdict)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// phaseTimesText is how long each phase took.
func (r BenchReport) phaseTimesText() string {
	return fmt.Sprintf("micro-benchmarks %.0f s, steady state %.0f s, ceilings %.0f s, disruption %.0f s, autoscale %.0f s, state %.0f s, RSS %.0f s, large state %.0f s",
		r.MicroSec, r.SteadySec, r.CeilingsSec, r.DisruptionSec, r.AutoscaleSec, r.StateSec, r.RSSSec, r.LargeStateSec)
}
