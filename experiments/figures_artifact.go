package experiments

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"koala/dataplane/metrics"
)

// The paper's figures under the artifact's file names
//
// The artifact's figure scripts (scripts/nsdi27/evaluation/Section5.*/,
// run by each section's runAllFigures.py) write Figure6/{azure,…}.pdf,
// Figure8/*_latency.pdf and Figure9.pdf … Figure16.pdf, each from the runs
// it names: Section 5.2's and 5.3 AWS's by result folder
// (<QueryName>_<ResultKeyword>), 5.3 Cloudlab's and 5.4's by
// ResultKeyword. WriteArtifactFigures writes each of them as one PNG under
// the same name, panels stacked on a shared time axis, drawn from the
// series of the koala figure that shows the same thing:
//
//	Figure6/<q>.png         koala Fig 6: source throughput, Kafka lag (lazy, SAR, DRRS)
//	Figure8/<q>_latency.png koala Fig 8: per-batch latency p99 and p50 (lazy, Remote)
//	Figure9.png             koala Fig 6 of the 16→32 scale-out: throughput, Kafka lag
//	Figure10.png            koala Fig 10: sink throughput, state transferred (repeated rescales)
//	Figure11.png            koala Fig 11: per-task throughput, Kafka lag (rebalance)
//	Figure12.png            koala Fig 12: throughput, state migrated (task migration variants)
//	Figure13.png            koala Fig 13: reconfigured operators' throughput, Kafka lag
//	Figure14.png            koala Fig 14: throughput, state migrated per state size
//	Figure15.png            koala Fig 15a: batch time and key lookup time per state size
//	Figure16.png            koala Fig 12's cumulative state migrated, per active key space and per hot-key share
//
// A figure none of whose runs is in the results is not drawn; one that
// lacks some is drawn without them; both are said in a note, as is what a
// koala figure shows differently from the paper's.

// artifactQueries52 are Section 5.2's queries: the file name the
// artifact's Figure 6 and 8 scripts write for each, and its QueryName.
var artifactQueries52 = []struct{ file, query string }{
	{"azure", "azure"}, {"borg", "borg"}, {"taxi", "taxi"}, {"twitch", "twitch"},
	{"q3", "nexmark_query3"}, {"q6mod", "nexmark_query6_modified"},
}

// artifactFigure is one figure file of the artifact.
type artifactFigure struct {
	file  string   // relative to the output directory
	koala string   // the koala figure it maps onto
	runs  []string // the runs it draws, by result folder or keyword, in line order
	// draw returns the figure's title, panels and markers for the runs
	// found (in the order of runs).
	draw func(file string, runs []RunData) (string, []Panel, []Marker)
	// note says what the figure shows differently from the paper's.
	note string
}

// ArtifactFigures lists every figure the artifact's scripts write.
func artifactFigures() []artifactFigure {
	var out []artifactFigure
	for _, q := range artifactQueries52 {
		out = append(out, artifactFigure{file: "Figure6/" + q.file + ".png", koala: "6",
			runs: []string{q.query + "_lazy", q.query + "_SAR", q.query + "_DRRS"}, draw: drawFig6})
	}
	for _, q := range artifactQueries52 {
		out = append(out, artifactFigure{file: "Figure8/" + q.file + "_latency.png", koala: "8",
			runs: []string{q.query + "_lazy", q.query + "_Remote"}, draw: drawFig8})
	}
	stateSizes := []string{"lazy_5MKeys", "lazy_10MKeys", "lazy_20MKeys", "lazy_40MKeys"}
	out = append(out,
		artifactFigure{file: "Figure9.png", koala: "6", runs: []string{"parallelism_16_to_32"}, draw: drawFig6},
		artifactFigure{file: "Figure10.png", koala: "10", runs: []string{"nexmark_query6_modified_multi_reconfig"}, draw: drawFig10,
			note: "sink throughput (the paper's: source)"},
		artifactFigure{file: "Figure11.png", koala: "11", runs: []string{"taxi_skew_rebalance"}, draw: drawFig11},
		artifactFigure{file: "Figure12.png", koala: "12", runs: []string{
			"nexmark_query6_modified_task_migration_fetch_on_demand",
			"nexmark_query6_modified_task_migration_progressive_default",
			"nexmark_query6_modified_task_migration_progressive_large"}, draw: drawFig12,
			note: "the variants overlaid, aligned on the migration start (the paper's: one column each)"},
		artifactFigure{file: "Figure13.png", koala: "13", runs: []string{"twitch_concurrent_multi_reconfig"}, draw: drawFig13,
			note: "each reconfigured operator's throughput (the paper's: the source's)"},
		artifactFigure{file: "Figure14.png", koala: "14", runs: stateSizes, draw: drawFig14},
		artifactFigure{file: "Figure15.png", koala: "15", runs: stateSizes, draw: drawFig15,
			note: "panel (a) only; the key lookup table's size (panel b) is koala's fig15_klt_vs_keyspace.png (--figures 15)"},
		artifactFigure{file: "Figure16.png", koala: "16", runs: union(fig16Locality, fig16Skew), draw: drawFig16,
			note: "cumulative state migrated over time; koala's fig16_*.png plot the totals against the swept value"},
	)
	return out
}

// ArtifactLabel is the artifact's result folder name of a run:
// <QueryName>_<ResultKeyword>, with the artifact's query name when the
// config used one (ParamArtifactQueryName); the keyword alone when the
// run's config is unknown.
func ArtifactLabel(r RunData) string {
	if r.Input == nil {
		return r.Entry.Keyword
	}
	q := r.Input.Params[ParamArtifactQueryName]
	if q == "" {
		q = r.Input.QueryName
	}
	return q + "_" + r.Entry.Keyword
}

// matches reports whether run r is the artifact's run want (a result
// folder name or a keyword).
func (r RunData) matches(want string) bool {
	return ArtifactLabel(r) == want || r.Entry.Keyword == want
}

// ArtifactFigureData lists the figures whose extra series (ReadRunData)
// the artifact's figures need of run r: Figure 11's per-task input,
// Figure 13's per-operator input, Figure 15's key lookups.
func ArtifactFigureData(r RunData) []string {
	var out []string
	for _, f := range artifactFigures() {
		if !slices.Contains([]string{"11", "13", "15"}, f.koala) || slices.Contains(out, f.koala) {
			continue
		}
		if slices.ContainsFunc(f.runs, r.matches) {
			out = append(out, f.koala)
		}
	}
	return out
}

// WriteArtifactFigures writes, under dir, each artifact figure whose runs
// are among runs, and returns the paths written and notes on the figures
// it drew differently, partly or not at all.
func WriteArtifactFigures(dir string, runs []RunData) (paths, notes []string, err error) {
	var absent []string
	for _, f := range artifactFigures() {
		var found []RunData
		var missing []string
		for _, want := range f.runs {
			i := slices.IndexFunc(runs, func(r RunData) bool { return r.matches(want) })
			if i < 0 {
				missing = append(missing, want)
				continue
			}
			found = append(found, runs[i])
		}
		if len(found) == 0 {
			absent = append(absent, f.file)
			continue
		}
		title, panels, markers := f.draw(f.file, found)
		panels = slices.DeleteFunc(panels, func(p Panel) bool { return !anyPoints(p.Series) })
		if len(panels) == 0 {
			notes = append(notes, fmt.Sprintf("%s: its runs (%s) have no metrics to draw (koala Fig %s)", f.file, runKeywords(found), f.koala))
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(f.file))
		if err := WriteStackedTimeSeriesPNG(p, title, panels, markers); err != nil {
			return paths, notes, fmt.Errorf("%s: %w", f.file, err)
		}
		paths = append(paths, p)
		n := fmt.Sprintf("%s: koala Fig %s", f.file, f.koala)
		if f.note != "" {
			n += "; " + f.note
		}
		if len(missing) > 0 {
			n += "; drawn without " + strings.Join(missing, ", ") + " (not in these results)"
		}
		notes = append(notes, n)
	}
	if len(absent) > 0 {
		notes = append(notes, fmt.Sprintf("not drawn, their runs are not in these results: %s", strings.Join(absent, ", ")))
	}
	return paths, notes, nil
}

// union is a followed by the items of b not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func runKeywords(runs []RunData) string {
	kws := make([]string, len(runs))
	for i, r := range runs {
		kws[i] = r.Entry.Keyword
	}
	return strings.Join(kws, ", ")
}

func figureRuns(runs []RunData) []FigureRun {
	out := make([]FigureRun, len(runs))
	for i, r := range runs {
		out[i] = r.FigureRun
	}
	return out
}

// startMarker is the reconfiguration start of figures aligned on it.
var startMarker = []Marker{{Sec: 0, Label: "reconfiguration start"}}

func drawFig6(file string, runs []RunData) (string, []Panel, []Marker) {
	src, lag := fig6Series(figureRuns(runs))
	return file + " (koala Fig 6): source throughput and Kafka lag",
		[]Panel{{YLabel: "events/s", Series: src}, {YLabel: "Kafka lag (records)", Series: lag}}, startMarker
}

func drawFig8(file string, runs []RunData) (string, []Panel, []Marker) {
	frs := figureRuns(runs)
	p99, p50 := Fig8Panels(frs)
	return fig8Title(file, frs), []Panel{p99, p50}, startMarker
}

func drawFig10(file string, runs []RunData) (string, []Panel, []Marker) {
	r := runs[0]
	tput, bytes := fig10Series(r)
	return file + " (koala Fig 10): " + r.Entry.Keyword,
		[]Panel{{YLabel: "sink records/s", Series: []Series{tput}}, {YLabel: "state to " + r.Target + " (MB/s)", Series: []Series{bytes}}},
		runMarkers(r.FigureRun)
}

func drawFig11(file string, runs []RunData) (string, []Panel, []Marker) {
	r := runs[0]
	return file + " (koala Fig 11): " + r.Entry.Keyword,
		[]Panel{{YLabel: r.Target + " records/s per task", Series: TaskSeries(r.TaskIn)}, {YLabel: "Kafka lag (records)", Series: []Series{lagSeries(r)}}},
		runMarkers(r.FigureRun)
}

func drawFig12(file string, runs []RunData) (string, []Panel, []Marker) {
	tput, migrated := Fig12Lines(runs)
	return file + " (koala Fig 12): task migration variants",
		[]Panel{{YLabel: "sink records/s", Series: tput}, {YLabel: "state migrated (MB)", Series: migrated}}, startMarker
}

func drawFig13(file string, runs []RunData) (string, []Panel, []Marker) {
	r := runs[0]
	return file + " (koala Fig 13): " + r.Entry.Keyword,
		[]Panel{{YLabel: "records/s in", Series: operatorSeries(r)}, {YLabel: "Kafka lag (records)", Series: []Series{lagSeries(r)}}},
		runMarkers(r.FigureRun)
}

func drawFig14(file string, runs []RunData) (string, []Panel, []Marker) {
	tput, moved := fig14Series(runs)
	return file + " (koala Fig 14): state size sweep",
		[]Panel{{YLabel: "sink records/s", Series: tput}, {YLabel: "state migrated (MB/s)", Series: moved}}, startMarker
}

func drawFig15(file string, runs []RunData) (string, []Panel, []Marker) {
	var batch, lookup []Series
	for _, r := range runs {
		lines := Fig15Lines(r) // key lookup, batch time (ms)
		zero := r.ReconfigZero()
		crop := func(pts []metrics.Point) []metrics.Point {
			return Window(Shift(pts, zero), -FigSecondsBefore, Fig12SecondsAfter)
		}
		lookup = append(lookup, Series{Label: r.Entry.Keyword, Points: crop(lines[0].Points)})
		batch = append(batch, Series{Label: r.Entry.Keyword, Points: crop(lines[1].Points)})
	}
	return file + " (koala Fig 15a): batch time and key lookup time",
		[]Panel{{YLabel: "batch time (ms)", Series: batch}, {YLabel: "key lookup (ms)", Series: lookup}}, startMarker
}

// Figure 16's rows: key locality (25 % hot keys over four key spaces) and
// skew (one key space, four hot-key shares); lazy_2M_200k_25 is in both,
// as in the paper.
var (
	fig16Locality = []string{"lazy_500k_50k_25", "lazy_1M_100k_25", "lazy_2M_200k_25", "lazy_4M_400k_25"}
	fig16Skew     = []string{"lazy_2M_200k_0", "lazy_2M_200k_25", "lazy_2M_200k_50", "lazy_2M_200k_75"}
)

func drawFig16(file string, runs []RunData) (string, []Panel, []Marker) {
	row := func(wants []string) []RunData {
		var out []RunData
		for _, w := range wants {
			if i := slices.IndexFunc(runs, func(r RunData) bool { return r.matches(w) }); i >= 0 {
				out = append(out, runs[i])
			}
		}
		return out
	}
	_, loc := Fig12Lines(row(fig16Locality))
	_, sk := Fig12Lines(row(fig16Skew))
	return file + " (koala Fig 16): state migrated by key locality and by skew",
		[]Panel{{YLabel: "migrated (MB), locality", Series: loc}, {YLabel: "migrated (MB), skew", Series: sk}}, startMarker
}
