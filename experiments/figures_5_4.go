package experiments

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/dataplane/produce"
)

// Section 5.4's figures (microbenchmarks of lazy state access). Each
// figure draws the experiments (runs grouped by experiment name) whose runs
// vary in what the figure sweeps:
//
//   - Fig 14 (state size): experiments whose runs load warm-up snapshots of
//     at least two sizes; one line per keyword aligned on the
//     reconfiguration start, and total state migrated against the loaded
//     state's size.
//   - Fig 15 (key lookup): per run of the Fig 14 experiments (every run
//     when there are none), the mean key lookup time against the mean batch
//     time (log scale); and, over all runs, the peak key lookup table size
//     against the key space (loaded keys, else the generator's NumKeys).
//   - Fig 16 (locality, skew): experiments whose non-Zipf runs have at
//     least two active key spaces (ActiveKeys), and experiments whose "zipf"
//     runs have at least two exponents; the state migrated and the time it
//     took against the swept value.

// Files written by the section 5.4 figures.
const (
	Fig14ThroughputFile = "fig14_%s_throughput.png"
	Fig14MigratedFile   = "fig14_%s_migrated.png"
	Fig14SummaryFile    = "fig14_%s_migrated_vs_state.png"
	Fig15LatencyFile    = "fig15_%s_lookup_vs_batch.png"
	Fig15KLTFile        = "fig15_klt_vs_keyspace.png"
	Fig16LocalityFile   = "fig16_locality_%s.png" // migrated, time
	Fig16SkewFile       = "fig16_skew_%s.png"
)

func loadsWarmUp(r RunData) bool {
	return r.Input != nil && r.Input.Params[control.ParamLoadWarmUpData] == "true"
}

// ActiveKeys is the run's active key space: the closed-auction stream's
// NumActivePeople (the sellers q6* draws from) where the config sets it,
// else the generator's NumKeys.
func (r RunData) ActiveKeys() int {
	if r.Input == nil {
		return 0
	}
	if n := r.Input.Producer.Nexmark; n != nil && n.NumActivePeople > 0 {
		return n.NumActivePeople
	}
	return r.Input.Producer.NumKeys
}

// KeySpace is the run's key space: the loaded warm-up keys, else the
// generator's NumKeys (0: unknown).
func (r RunData) KeySpace() float64 {
	if r.StateKeys > 0 {
		return float64(r.StateKeys)
	}
	if r.Input != nil {
		return float64(r.Input.Producer.NumKeys)
	}
	return 0
}

// Migration is the state the run's first reconfiguration moved and how
// long moving 90 % of it took (see ReconfigWindows; the last keys of a
// fetch-on-demand migration trickle in until the run ends).
func (r RunData) Migration() (bytes, secs float64, ok bool) {
	ms := runMarkers(r.FigureRun)
	if len(ms) == 0 {
		return 0, 0, false
	}
	w := ReconfigWindows(markerSecs(ms), r.Sink, r.Bytes)[0]
	return w.Bytes, w.Migrate90Sec, true
}

// XYPoints builds one series of (x, y) points from the runs for which x
// and y are known, sorted by x.
func XYPoints(label string, runs []RunData, x, y func(RunData) (float64, bool)) Series {
	s := Series{Label: label}
	for _, r := range runs {
		xv, okx := x(r)
		yv, oky := y(r)
		if okx && oky && isFinite(xv) && isFinite(yv) {
			s.Points = append(s.Points, metrics.Point{Sec: xv, Value: yv})
		}
	}
	s.Points = CleanPoints(s.Points)
	return s
}

func migratedMB(r RunData) (float64, bool) {
	b, _, ok := r.Migration()
	return b / mb, ok
}

func migrationSecs(r RunData) (float64, bool) {
	_, s, ok := r.Migration()
	return s, ok
}

func peakOf(pts []metrics.Point) (float64, bool) {
	v, ok := 0.0, false
	for _, p := range pts {
		if isFinite(p.Value) {
			v, ok = max(v, p.Value), true
		}
	}
	return v, ok
}

// WriteFig14 draws the state-size sweep.
func WriteFig14(dir string, runs []RunData) ([]string, error) {
	var paths []string
	var err error
	for _, g := range fig14Groups(runs) {
		name := safeName(g[0].Entry.Experiment)
		tput, moved := fig14Series(g)
		ms := []Marker{{Sec: 0, Label: "reconfiguration start"}}
		if paths, err = writeChart(paths, filepath.Join(dir, fmt.Sprintf(Fig14ThroughputFile, name)),
			"Fig 14a "+g[0].Entry.Experiment+": sink throughput", "records/s", tput, ms); err != nil {
			return paths, err
		}
		if paths, err = writeChart(paths, filepath.Join(dir, fmt.Sprintf(Fig14MigratedFile, name)),
			"Fig 14b "+g[0].Entry.Experiment+": state migrated", "MB/s", moved, ms); err != nil {
			return paths, err
		}
		stateMB := func(r RunData) (float64, bool) { return float64(r.StateBytes) / mb, r.StateBytes > 0 }
		sum := XYPoints("state migrated", g, stateMB, migratedMB)
		if len(sum.Points) > 0 {
			p := filepath.Join(dir, fmt.Sprintf(Fig14SummaryFile, name))
			if err := WriteXYPNG(p, "Fig 14 "+g[0].Entry.Experiment+": state migrated vs total state", "total state (MB, warm-up snapshot)", "migrated (MB)", []Series{sum}, false); err != nil {
				return paths, err
			}
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// fig14Series are Fig 14's lines, one per run labelled with its loaded
// state's size: sink records/s and MB/s migrated, aligned on the
// reconfiguration start.
func fig14Series(runs []RunData) (tput, moved []Series) {
	for _, r := range runs {
		zero := r.ReconfigZero()
		crop := func(pts []metrics.Point) []metrics.Point {
			return Window(Shift(pts, zero), -FigSecondsBefore, Fig12SecondsAfter)
		}
		label := r.Entry.Keyword
		if r.StateBytes > 0 {
			label += " (" + BytesText(float64(r.StateBytes)) + ")"
		}
		tput = append(tput, Series{Label: label, Points: crop(r.Sink)})
		moved = append(moved, Series{Label: label, Points: scale(crop(r.Bytes), 1.0/mb)})
	}
	return tput, moved
}

// Fig15Lines is the run's mean key lookup time and mean batch time in ms,
// seconds where either is 0 left out (log scale).
func Fig15Lines(r RunData) []Series {
	pos := func(pts []metrics.Point) []metrics.Point {
		return slices.DeleteFunc(scale(CleanPoints(pts), 1e-3), func(p metrics.Point) bool { return p.Value <= 0 })
	}
	return []Series{{Label: "key lookup (mean per batch)", Points: pos(r.Lookup)}, {Label: "batch time (mean)", Points: pos(r.BatchAvg)}}
}

// WriteFig15 draws key lookup against batch time, and the lookup table's
// size against the key space.
func WriteFig15(dir string, runs []RunData) ([]string, error) {
	var paths []string
	var pick []RunData
	for _, g := range fig14Groups(runs) {
		pick = append(pick, g...)
	}
	if len(pick) == 0 {
		pick = runs
	}
	for _, r := range pick {
		lines := Fig15Lines(r)
		if !anyPoints(lines) {
			continue
		}
		p := filepath.Join(dir, fmt.Sprintf(Fig15LatencyFile, r.name()))
		if err := writeLogTimeSeriesPNG(p, "Fig 15a "+r.Entry.Keyword+": key lookup vs batch time ("+r.Target+")", "ms (log)", lines, runMarkers(r.FigureRun)); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	keys := func(r RunData) (float64, bool) { return r.KeySpace(), r.KeySpace() > 0 }
	entries := XYPoints("peak KLT entries", runs, keys, func(r RunData) (float64, bool) { return peakOf(r.KLTSize) })
	kb := XYPoints("peak KLT size (KB)", runs, keys, func(r RunData) (float64, bool) {
		v, ok := peakOf(r.KLTBytes)
		return v / 1e3, ok
	})
	if len(entries.Points) > 0 {
		p := filepath.Join(dir, Fig15KLTFile)
		if err := WriteXYPNG(p, "Fig 15b: key lookup table size vs key space", "key space (keys)", "entries / KB", []Series{entries, kb}, true); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Fig16Split returns the runs of the locality experiments (non-Zipf runs
// over at least two ActiveKeys) and of the skew experiments (runs of the
// "zipf" generator, or of Nexmark "zipf" sellers, over at least two
// exponents).
func Fig16Split(runs []RunData) (locality, skew []RunData) {
	var plain, zipf []RunData
	for _, r := range runs {
		if r.Input == nil || len(r.Entry.Reconfigs) == 0 {
			continue
		}
		if r.Input.Producer.Generator == produce.ZipfGenerator || r.Input.Producer.Nexmark != nil && r.Input.Producer.Nexmark.Sellers == "zipf" {
			zipf = append(zipf, r)
		} else {
			plain = append(plain, r)
		}
	}
	for _, g := range varyingGroups(plain, func(r RunData) (float64, bool) { return float64(r.ActiveKeys()), true }) {
		locality = append(locality, g...)
	}
	for _, g := range varyingGroups(zipf, func(r RunData) (float64, bool) { return r.Input.Producer.Skew, true }) {
		skew = append(skew, g...)
	}
	return locality, skew
}

// fig14Groups are the experiments whose runs load warm-up state of at
// least two sizes.
func fig14Groups(runs []RunData) [][]RunData {
	var warm []RunData
	for _, r := range runs {
		if loadsWarmUp(r) && len(r.Entry.Reconfigs) > 0 {
			warm = append(warm, r)
		}
	}
	return varyingGroups(warm, func(r RunData) (float64, bool) { return float64(r.StateBytes), r.StateBytes > 0 })
}

// varyingGroups groups runs by experiment and keeps the groups in which
// key takes at least two values.
func varyingGroups(runs []RunData, key func(RunData) (float64, bool)) [][]RunData {
	var out [][]RunData
	for _, g := range groupData(runs) {
		seen := map[float64]bool{}
		for _, r := range g {
			if v, ok := key(r); ok {
				seen[v] = true
			}
		}
		if len(seen) >= 2 {
			out = append(out, g)
		}
	}
	return out
}

// WriteFig16 draws state migrated and migration time against the active
// key space (locality) and the Zipf exponent (skew).
func WriteFig16(dir string, runs []RunData) ([]string, error) {
	var paths []string
	locality, skew := Fig16Split(runs)
	numKeys := func(r RunData) (float64, bool) { return float64(r.ActiveKeys()), true }
	zipf := func(r RunData) (float64, bool) { return r.Input.Producer.Skew, true }
	for _, panel := range []struct {
		file, title, x string
		runs           []RunData
		xf             func(RunData) (float64, bool)
	}{
		{Fig16LocalityFile, "Fig 16a locality", "active key space (keys)", locality, numKeys},
		{Fig16SkewFile, "Fig 16b skew", "Zipf exponent", skew, zipf},
	} {
		if len(panel.runs) == 0 {
			continue
		}
		for _, y := range []struct {
			name, label string
			f           func(RunData) (float64, bool)
		}{{"migrated", "state migrated (MB)", migratedMB}, {"time", "time to migrate 90 % (s)", migrationSecs}} {
			s := XYPoints(y.label, panel.runs, panel.xf, y.f)
			if len(s.Points) == 0 {
				continue
			}
			p := filepath.Join(dir, fmt.Sprintf(panel.file, y.name))
			if err := WriteXYPNG(p, panel.title+": "+y.label, panel.x, y.label, []Series{s}, false); err != nil {
				return paths, err
			}
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// Fig54Row is one line of the section 5.4 summary table.
type Fig54Row struct {
	Keyword    string  `json:"keyword"`
	KeySpace   float64 `json:"key_space"`
	StateBytes uint64  `json:"state_bytes"`
	ActiveKeys int     `json:"active_keys"`
	Skew       float64 `json:"skew"`
	PreTput    float64 `json:"pre_tput"`
	MinTput    float64 `json:"min_tput"`
	Migrated   float64 `json:"migrated"`
	MigrateSec float64 `json:"migrate_sec"`
	Migrate90  float64 `json:"migrate90_sec"`
	LookupUs   float64 `json:"lookup_us"` // mean over the run
	BatchUs    float64 `json:"batch_us"`
	PeakKLT    float64 `json:"peak_klt"`
}

// Fig54Rows summarises every run with a reconfiguration.
func Fig54Rows(runs []RunData) []Fig54Row {
	var out []Fig54Row
	for _, r := range runs {
		ms := runMarkers(r.FigureRun)
		if len(ms) == 0 {
			continue
		}
		w := ReconfigWindows(markerSecs(ms), r.Sink, r.Bytes)[0]
		row := Fig54Row{Keyword: r.Entry.Keyword, KeySpace: r.KeySpace(), StateBytes: r.StateBytes, PreTput: w.PreTput, MinTput: w.MinTput, Migrated: w.Bytes, MigrateSec: w.MigrateSec, Migrate90: w.Migrate90Sec}
		if r.Input != nil {
			row.ActiveKeys, row.Skew = r.ActiveKeys(), r.Input.Producer.Skew
		}
		row.LookupUs = meanValue(r.Lookup)
		row.BatchUs = meanValue(r.BatchAvg)
		row.PeakKLT, _ = peakOf(r.KLTSize)
		out = append(out, row)
	}
	return out
}

// FormatFig54Rows prints the rows as a Markdown table.
func FormatFig54Rows(rows []Fig54Row) string {
	s := "| run | state | key space | active keys | skew | pre rec/s | min rec/s (10 s) | migrated | migration s (90 %, all) | mean lookup µs | mean batch µs | peak KLT |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
	for _, r := range rows {
		state := "-"
		if r.StateBytes > 0 {
			state = BytesText(float64(r.StateBytes))
		}
		s += fmt.Sprintf("| %s | %s | %.0f | %d | %s | %.0f | %.0f | %s | %.0f, %.0f | %.1f | %.0f | %.0f |\n", r.Keyword, state, r.KeySpace, r.ActiveKeys,
			strconv.FormatFloat(r.Skew, 'g', -1, 64), r.PreTput, r.MinTput, BytesText(r.Migrated), r.Migrate90, r.MigrateSec, r.LookupUs, r.BatchUs, r.PeakKLT)
	}
	return s
}

func meanValue(pts []metrics.Point) float64 {
	sum, n := 0.0, 0
	for _, p := range pts {
		if isFinite(p.Value) && p.Value > 0 {
			sum += p.Value
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// groupData groups runs by experiment in first-appearance order.
func groupData(runs []RunData) [][]RunData {
	var out [][]RunData
	idx := map[string]int{}
	for _, r := range runs {
		i, ok := idx[r.Entry.Experiment]
		if !ok {
			i = len(out)
			idx[r.Entry.Experiment] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// WriteXYPNG draws one line with point markers per series (x = Sec) and
// writes a PNG; logX uses a logarithmic x axis (non-positive x dropped).
func WriteXYPNG(path, title, xLabel, yLabel string, series []Series, logX bool) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Tick.Marker = compactTicks{}
	p.Y.Tick.Marker = compactTicks{}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	drawn := 0
	for i, s := range series {
		pts := s.Points
		if logX {
			pts = slices.DeleteFunc(slices.Clone(pts), func(pt metrics.Point) bool { return pt.Sec <= 0 })
		}
		xys := finiteXYs(pts)
		if len(xys) == 0 {
			continue
		}
		lp, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("experiments: plot series %q: %w", s.Label, err)
		}
		lp.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		p.Add(lp, sc)
		p.Legend.Add(s.Label, lp, sc)
		drawn++
	}
	if drawn == 0 {
		return fmt.Errorf("experiments: plot %s: no points", path)
	}
	p.Y.Min = min(p.Y.Min, 0)
	p.Y.Max = max(p.Y.Max, p.Y.Min+1) * 1.08
	return savePlot(p, path)
}

// writeLogTimeSeriesPNG is WriteTimeSeriesPNG with a logarithmic y axis
// (for values orders of magnitude apart); values must be > 0.
func writeLogTimeSeriesPNG(path, title, yLabel string, series []Series, markers []Marker) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	p.X.Tick.Marker = secondTicks{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	lo, hi := 0.0, 0.0
	for i, s := range series {
		xys := finiteXYs(slices.DeleteFunc(slices.Clone(s.Points), func(pt metrics.Point) bool { return pt.Value <= 0 }))
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("experiments: plot series %q: %w", s.Label, err)
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(s.Label, line)
		for _, xy := range xys {
			if lo == 0 || xy.Y < lo {
				lo = xy.Y
			}
			hi = max(hi, xy.Y)
		}
	}
	if hi == 0 {
		return fmt.Errorf("experiments: plot %s: no positive values", path)
	}
	for _, m := range markers {
		line, err := plotter.NewLine(plotter.XYs{{X: m.Sec, Y: lo}, {X: m.Sec, Y: hi}})
		if err != nil {
			return err
		}
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(line)
	}
	return savePlot(p, path)
}

func savePlot(p *plot.Plot, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("experiments: plot: %w", err)
	}
	if err := p.Save(plotWidth, plotHeight, path); err != nil {
		return fmt.Errorf("experiments: plot %s: %w", path, err)
	}
	return nil
}
