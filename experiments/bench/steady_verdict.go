package bench

import (
	"fmt"
	"strings"

	"koala/experiments"
)

// Verdicts of a steady or large-state row, and the texts that state what
// a figure was measured under: accounting, placement, fetch size, state.

// label names the row (its query for runs recorded without one).
func (s Steady) label() string {
	if s.Row != "" {
		return s.Row
	}
	return s.Query
}

func (s Steady) unit() string {
	if s.Unit != "" {
		return s.Unit
	}
	return "ev"
}

// stateProof says whether a large-state row's state was what its targets
// need: at least MinStateBytes on disk when the window opened, at least
// StateCacheFactor × its tasks' value caches, and reads the caches did not
// mostly answer (hit rate ≤ 1/StateCacheFactor over the window). Rows
// without MinStateBytes need nothing. why says what fell short.
func (s Steady) stateProof() (ok bool, why string) {
	if s.MinStateBytes <= 0 {
		return true, ""
	}
	st := s.State
	switch {
	case !st.DiskOK:
		return false, "state on disk not read at the window's start: " + st.DiskErr
	case st.DiskBytes < s.MinStateBytes:
		return false, fmt.Sprintf("%s of state on disk at the window's start, under the %s the row needs", experiments.BytesText(st.DiskBytes), experiments.BytesText(s.MinStateBytes))
	case !st.CacheOK:
		return false, "value-cache counters not read: " + st.CacheErr
	case st.DiskBytes < StateCacheFactor*st.LimitBytes:
		return false, fmt.Sprintf("%s on disk is under %.0f × the tasks' value caches (%s)", experiments.BytesText(st.DiskBytes), StateCacheFactor, experiments.BytesText(st.LimitBytes))
	}
	rate, ok := st.HitRate()
	switch {
	case !ok:
		return false, "the value caches saw no lookups over the window"
	case rate > 1/StateCacheFactor:
		return false, fmt.Sprintf("the value caches answered %.1f %% of the window's %.0f lookups (more than 1/%.0f): the keys read fit the caches, so the state's size did not matter", 100*rate, st.Lookups, StateCacheFactor)
	}
	return true, ""
}

// PerCoreVerdict judges the row's per-core target; why is set when it
// is not measured.
func (s Steady) PerCoreVerdict() (v, why string) {
	switch {
	case s.Status != experiments.StatusOK:
		return VerdictUnknown, "run " + s.Status + ": " + s.Reason
	case s.Tuned != "":
		return VerdictUnknown, "a tuned row is never judged (" + s.Tuned + ")"
	case s.Target <= 0:
		return VerdictUnknown, "no per-core target"
	case s.EventsPerCPUSec <= 0:
		return VerdictUnknown, "no worker CPU over the window"
	}
	if ok, why := s.stateProof(); !ok {
		return VerdictUnknown, why
	}
	return verdict(s.EventsPerCPUSec >= s.Target), ""
}

// lagTolerance is how many records the lag may grow by over the window
// for the run to count as sustained (LagToleranceSec of the offered rate).
func (s Steady) lagTolerance() float64 { return LagToleranceSec * float64(max(s.Rate, 1)) }

// Sustained says whether the pipeline kept up over the window: its Kafka
// lag (produced minus processed) grew by less than lagTolerance. ok is
// false when the lag was not read.
func (s Steady) Sustained() (sustained, ok bool) {
	if !s.LagRead {
		return false, false
	}
	return s.LagGrowth < s.lagTolerance(), true
}

// SustainedVerdict judges the row's sustained target: met when the
// producers delivered the target rate and the lag did not grow, missed
// when they delivered it and the lag grew; not measured (why) when the
// run offered less, the producers fell short, or the lag was not read.
func (s Steady) SustainedVerdict() (v, why string) {
	t := s.SustainedTarget
	switch {
	case s.Status != experiments.StatusOK:
		return VerdictUnknown, "run " + s.Status + ": " + s.Reason
	case t <= 0:
		return VerdictUnknown, "no sustained target"
	case s.Tuned != "":
		return VerdictUnknown, "a tuned row is never judged (" + s.Tuned + ")"
	}
	if ok, why := s.stateProof(); !ok {
		return VerdictUnknown, why
	}
	sustained, ok := s.Sustained()
	switch {
	case !ok:
		return VerdictUnknown, "Kafka lag not read over the window"
	case float64(s.Rate) < t:
		return VerdictUnknown, fmt.Sprintf("the run offered %d %s/s, under the target", s.Rate, s.unit())
	case s.ProducedPerSec < ProducedShare*t:
		return VerdictUnknown, fmt.Sprintf("the producers delivered %.0f %s/s of the %d offered (under %.0f %% of the target): they, not the pipeline, set the rate", s.ProducedPerSec, s.unit(), s.Rate, 100*ProducedShare)
	}
	return verdict(sustained), ""
}

// lagText is the lag over the window.
func (s Steady) lagText() string {
	if !s.LagRead {
		return "not read"
	}
	return fmt.Sprintf("%.0f → %.0f, growth %+.0f (%.2f s of the offered rate)", s.StartLag, s.EndLag, s.LagGrowth, s.LagGrowth/float64(max(s.Rate, 1)))
}

// sustainedCell is the table's sustained column.
func (s Steady) sustainedCell() string {
	sus, ok := s.Sustained()
	switch {
	case !ok:
		return "n/a"
	case sus:
		return fmt.Sprintf("yes (%+.0f)", s.LagGrowth)
	}
	return fmt.Sprintf("**no** (%+.0f)", s.LagGrowth)
}

// placementText names the task placement and the tasks that matter.
func (s Steady) placementText() string {
	p := "round robin"
	if s.TaskPlacement != "" {
		p = s.TaskPlacement
	}
	if s.SourceTasks > 0 {
		p += fmt.Sprintf(", %d source", s.SourceTasks)
		if s.OperatorTasks > 0 {
			p += fmt.Sprintf(" + %d %s", s.OperatorTasks, s.Operator)
		}
	}
	return p
}

// fetchText is the source's fetch sizes.
func (s Steady) fetchText() string {
	if s.FetchMinBytes <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s / %d ms", binaryBytes(s.FetchMinBytes), s.FetchMaxWaitMs)
}

// binaryBytes prints a power-of-two size as KiB or MiB when it is whole.
func binaryBytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// stateText is the state at the window's start and the caches' hit rate.
func (s Steady) stateText() string {
	st := s.State
	var parts []string
	switch {
	case st.DiskOK && st.DiskBytes > 0:
		parts = append(parts, experiments.BytesText(st.DiskBytes)+" on disk at the window's start")
	case st.DiskOK:
		parts = append(parts, "none on disk ("+s.Backend+" backend)")
	default:
		parts = append(parts, "disk not read")
	}
	if rate, ok := st.HitRate(); ok {
		parts = append(parts, fmt.Sprintf("value caches %s, hit rate %.1f %% of %.0f lookups", experiments.BytesText(st.LimitBytes), 100*rate, st.Lookups))
	}
	return strings.Join(parts, ", ")
}

// accountingText states how the per-core figure was counted.
func (s Steady) accountingText() string {
	who := "worker processes " + strings.Join(s.TaskWorkers, ", ")
	if len(s.TaskWorkers) == 0 {
		who = "task worker processes"
	}
	if len(s.ProducerWorkers) == 0 {
		return "CPU of the " + who + ", producers included (they shared those workers); Kafka, ClickHouse, Temporal, NATS excluded"
	}
	return "CPU of the " + who + " only; producers (on " + strings.Join(s.ProducerWorkers, ", ") + "), Kafka, ClickHouse, Temporal, NATS excluded"
}

// conditionsText is what a verdict row states next to its number.
func (s Steady) conditionsText() string {
	return fmt.Sprintf("accounting: %s; placement %s; fetch %s; state: %s", s.accountingText(), s.placementText(), s.fetchText(), s.stateText())
}
