package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"koala/dataplane/metrics"
	"koala/experiments"
)

// printPlan prints the seed's schedule before the soak starts, so a run
// can be compared with its rerun.
func printPlan(w io.Writer, seed uint64, segs []Segment, taskWorkers []string, producer string) {
	c := Count(segs)
	fmt.Fprintf(w, "soak seed %d: %d segment(s), %d reconfigurations, %d faults planned; tasks on %s, producers on %s\n",
		seed, len(segs), c.Reconfigs, c.Faults, strings.Join(taskWorkers, ","), producer)
	for _, s := range segs {
		fmt.Fprintf(w, "  segment %d at %s: %s for %s\n", s.Index, s.Start, s.Protocol, s.Length)
		for _, e := range s.Events {
			fmt.Fprintf(w, "    #%-3d +%-7s %s\n", e.Seq, e.At, e)
		}
	}
}

// report prints the final tables and writes them, result.json and the
// plot under ResultsDir.
func (d *driver) report(ctx context.Context, res *Result) error {
	_ = ctx
	dir := d.cfg.ResultsDir
	if dir == "" {
		dir = "results"
	}
	res.Dir = filepath.Join(dir, fmt.Sprintf("soak-%d-%s", res.Seed, d.begin.UTC().Format("20060102-150405")))
	if err := os.MkdirAll(res.Dir, 0o755); err != nil {
		return fmt.Errorf("soak results: %w", err)
	}
	var b strings.Builder
	writeTables(&b, res)
	fmt.Fprint(d.cfg.Out, b.String())
	if err := os.WriteFile(filepath.Join(res.Dir, "soak.txt"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("soak results: %w", err)
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("soak results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(res.Dir, "result.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("soak results: %w", err)
	}
	res.PNG = filepath.Join(res.Dir, "soak.png")
	if err := writePlot(res.PNG, res); err != nil {
		res.PNG = ""
		return fmt.Errorf("soak plot: %w", err)
	}
	fmt.Fprintf(d.cfg.Out, "plot    %s\ntables  %s\n", res.PNG, filepath.Join(res.Dir, "soak.txt"))
	return nil
}

// writeTables writes the event table, the oracle's table and the totals.
func writeTables(w io.Writer, res *Result) {
	evs := slices.Clone(res.Events)
	slices.SortFunc(evs, func(a, b EventRecord) int { return a.Seq - b.Seq })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tAT\tSEG\tPROTOCOL\tEVENT\tTOOK\tOUTCOME")
	for _, e := range evs {
		status := "ok"
		switch {
		case e.Rejected:
			status = "rejected"
		case !e.OK:
			status = "FAILED"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%.1fs\t%s: %s\n", e.Seq, e.Start.Round(100*time.Millisecond), e.Segment, e.Protocol, e.Event, e.Took.Seconds(), status, oneLine(e.Outcome, 140))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEG\tPROTOCOL\tQUERY\tINPUTS\tEXPECTED\tOUTPUTS\tLOST\tDUPLICATED\tREORDERED\tLATE\tNOTE")
	for _, c := range res.Checks {
		reord := fmt.Sprint(c.Reordered)
		if c.Reordered < 0 {
			reord = "n/a"
		}
		note := c.Err
		if note == "" && c.NA != "" {
			note = "reordered n/a: " + c.NA
		}
		late := fmt.Sprint(c.Late)
		if c.Late < 0 {
			late = "?"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", c.Segment, c.Protocol, c.Query, c.Inputs, c.Expected, c.Outputs, c.Lost, c.Duplicated, reord, late, oneLine(note, 120))
	}
	tw.Flush()
	n := res.Counts()
	var lost, dup, reord int64
	for _, c := range res.Checks {
		lost, dup, reord = lost+c.Lost, dup+c.Duplicated, reord+max(c.Reordered, 0)
	}
	fmt.Fprintf(w, "\nseed    %d\nreconfigurations %d done, %d rejected by the job, %d failed\nfaults  %d injected (%d failed to inject or recover)\nrecoveries %d\n",
		res.Seed, n.ReconfDone, n.ReconfRejected, n.ReconfFailed, n.Faults, n.FaultsFailed, res.Recoveries)
	verdict := "EXACT"
	if !res.Exact() {
		verdict = "NOT EXACT"
	}
	fmt.Fprintf(w, "lost=%d duplicated=%d reordered=%d over %d job(s): %s\n", lost, dup, reord, len(res.Checks), verdict)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// writePlot draws the jobs' input throughput and Kafka lag per query over
// the soak, every event marked (R: reconfiguration, F: fault).
func writePlot(path string, res *Result) error {
	byQuery := map[string]*sample{}
	for _, s := range res.samples {
		q := byQuery[s.Query]
		if q == nil {
			q = &sample{Query: s.Query}
			byQuery[s.Query] = q
		}
		q.Throughput = append(q.Throughput, s.Throughput...)
		q.Lag = append(q.Lag, s.Lag...)
	}
	var tp, lag []experiments.Series
	for _, q := range Queries {
		s := byQuery[q]
		if s == nil {
			s = &sample{}
		}
		tp = append(tp, experiments.Series{Label: q, Points: nonEmpty(s.Throughput)})
		lag = append(lag, experiments.Series{Label: q, Points: nonEmpty(s.Lag)})
	}
	// Every event gets its line; only faults and failed reconfigurations
	// get a label (a 15-minute soak has ~80 events: labels on all of them
	// would cover the curves). The event table names them by time.
	var marks []experiments.Marker
	for _, e := range res.Events {
		label := ""
		switch {
		case e.Fault != nil:
			label = strings.TrimPrefix(strings.TrimPrefix(string(e.Fault.Kind), "restart-"), "kill-")
		case !e.OK && !e.Rejected:
			label = fmt.Sprintf("R%d!", e.Seq)
		}
		marks = append(marks, experiments.Marker{Sec: e.Start.Seconds(), Label: label})
	}
	title := fmt.Sprintf("koala soak, seed %d", res.Seed)
	return experiments.WriteStackedTimeSeriesPNG(path, title, []experiments.Panel{
		{YLabel: "input records/s", Series: tp},
		{YLabel: "Kafka lag (records)", Series: lag},
	}, marks)
}

// nonEmpty gives a series without data one point at zero, which the plot
// draws without complaint.
func nonEmpty(pts []metrics.Point) []metrics.Point {
	if len(pts) == 0 {
		return []metrics.Point{{Sec: 0, Value: 0}}
	}
	return pts
}
