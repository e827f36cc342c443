package bench

import (
	"fmt"
	"strings"

	"koala/experiments"
)

// Markdown sections of the ceilings and the RSS phase.

func (r BenchReport) ceilingsMarkdown() string {
	var b strings.Builder
	b.WriteString("\n## Component ceilings\n\n")
	if len(r.Ceilings) == 0 {
		b.WriteString("Not run.\n")
		return b.String()
	}
	b.WriteString("Each component alone, in this run, on the same machine (so under the same load). Every figure is events/s of one client, one goroutine or (grpc-exchange) one sending stream into one receiving server; records have a 16-byte key and an 80-byte value.\n\n")
	b.WriteString("| component | events/s | events | seconds | what | error |\n|---|---|---|---|---|---|\n")
	for _, c := range r.Ceilings {
		fmt.Fprintf(&b, "| %s | %.0f | %d | %.1f | %s | %s |\n", c.Component, c.EventsPerSec, c.Events, c.Seconds, esc(c.What), esc(c.Error))
	}
	b.WriteString("\nPipeline figure (events/s of each steady-state or large-state row) as a fraction of its slowest measured component:\n\n")
	b.WriteString("| row | counted ev/s | slowest component | its ev/s | fraction | not measured |\n|---|---|---|---|---|---|\n")
	for _, f := range r.Fractions {
		frac := "n/a"
		if f.Slowest != "" {
			frac = fmt.Sprintf("%.2f", f.Fraction)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %.0f | %s | %s |\n", f.Query, f.EventsPerSec, f.Slowest, f.SlowestRate, frac, strings.Join(f.Missing, ", "))
	}
	if len(r.Fractions) == 0 {
		b.WriteString("| (no steady-state run in this bench) ||||||\n")
	}
	return b.String()
}

func (r RSSRun) summaryText() string {
	var parts []string
	for _, w := range r.Workers {
		parts = append(parts, fmt.Sprintf("%s max %.0f MB, %+.1f %%", w.Worker, w.MaxMB, 100*w.LastHalfGrowth))
	}
	return strings.Join(parts, "; ")
}

func (r BenchReport) rssMarkdown() string {
	var b strings.Builder
	b.WriteString("\n\n## RSS under backpressure\n\n")
	if r.RSS == nil {
		b.WriteString("Not run.\n")
		return b.String()
	}
	x := r.RSS
	fmt.Fprintf(&b, "The %s query offered %d ev/s (well above its steady-state ceiling) for %d s, so the backlog grows in Kafka; every worker's VmRSS (/proc/<pid>/status) sampled each second. "+
		"*growth* = least-squares slope over the last half of the samples × that half's duration ÷ its mean RSS; target ≤ %.0f %%. Workflow `%s`.\n\n",
		x.Query, x.Rate, x.RuntimeSec, 100*TargetRSSGrowth, x.WorkflowID)
	if x.Status != experiments.StatusOK {
		// The samples of the window are still shown: they do not depend on
		// how the run ended, but the verdict is left open.
		fmt.Fprintf(&b, "%s: %s\n\n", x.Status, esc(x.Reason))
	} else {
		fmt.Fprintf(&b, "Produced %d records in the window; %s of the window (the source tasks' `kafka_lag`: records not yet processed by the operator after the source, read ahead or not); the sink counted %.0f records by the end of the job (the backlog drains after the window, outside the RSS samples). "+
			"Sources read at most `SourceMaxInFlightRecords` ahead of the next operator, worker queues are bounded (exchange peer queues, task inboxes) and each Pebble store has a fixed memtable and block cache, so RSS is expected to rise while those fill and then stay flat; a growth verdict within the first minute or two can be that warm-up (raise --rss-seconds to separate it).\n\n",
			x.Produced, x.lagText(), x.SinkEvents)
		if grew, why := x.LagGrowth(); !grew {
			fmt.Fprintf(&b, "**Not measured**: %s.\n\n", why)
		}
	}
	b.WriteString("| worker | pid | samples | max RSS | last-half mean | slope | growth over last half | verdict |\n|---|---|---|---|---|---|---|---|\n")
	for _, w := range x.Workers {
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f MB | %.1f MB | %+.3f MB/s | %+.1f %% over %.0f s | %s |\n",
			w.Worker, w.PID, w.Samples, w.MaxMB, w.LastHalfMeanMB, w.SlopeMBPerSec, 100*w.LastHalfGrowth, w.LastHalfSeconds, w.Verdict)
	}
	return b.String()
}
