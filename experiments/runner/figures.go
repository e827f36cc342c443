package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"koala/dataplane/metrics"
	"koala/experiments"
	"koala/workflows"
)

// FiguresOptions configure Figures.
type FiguresOptions struct {
	ClickHouse *metrics.ClickHouse
	Dirs       []string // suite result directories (summary.json), merged
	Figures    []string // empty: each suite file's list, else DefaultFigures
	// OutDir is where the figures go (empty: Dirs[0]/figures, and the
	// artifact-named ones into Dirs[0]).
	OutDir string
}

// Figures reads the succeeded runs of the suites in Dirs from ClickHouse and
// draws the figures asked for, printing their tables.
func Figures(ctx context.Context, o FiguresOptions) error {
	var entries []workflows.SuiteEntryResult
	inputs := map[string]*workflows.ExperimentInput{}
	figs := o.Figures
	for _, dir := range o.Dirs {
		sum, err := experiments.ReadSuiteSummary(dir)
		if err != nil {
			return err
		}
		entries = append(entries, sum.Entries...)
		if len(o.Figures) == 0 {
			f, err := experiments.SuiteFigures(sum.File)
			if err != nil {
				fmt.Printf("%s: %v (drawing Figures %v; use --figures)\n", dir, err, experiments.DefaultFigures)
				f = experiments.DefaultFigures
			}
			figs = mergeFigures(figs, f)
		}
		in, err := experiments.SuiteInputs(sum.File)
		if err != nil {
			fmt.Printf("%s: suite configs not readable (%v): figures 14-16 lack state sizes and key spaces\n", dir, err)
		}
		for k, v := range in {
			inputs[k] = v
		}
	}
	if err := experiments.CheckFigures(figs); err != nil {
		return fmt.Errorf("--figures: %w", err)
	}
	ch := o.ClickHouse
	var runs []experiments.RunData
	for _, e := range entries {
		if e.Status != workflows.SuiteSucceeded {
			fmt.Printf("skip %s -> %s: %s\n", e.Experiment, e.Keyword, e.Status)
			continue
		}
		fr := experiments.ReadFigureRun(ctx, ch, e)
		in := inputs[experiments.RunKey(e.Experiment, e.Keyword)]
		// The artifact-named figures may need series figs does not.
		need := experiments.ArtifactFigureData(experiments.RunData{FigureRun: fr, Input: in})
		r := experiments.ReadRunData(ctx, ch, fr, in, mergeFigures(slices.Clone(figs), need))
		for _, msg := range r.Errors {
			fmt.Printf("%s -> %s: %s\n", e.Experiment, e.Keyword, msg)
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return fmt.Errorf("no succeeded run in %s", strings.Join(o.Dirs, ", "))
	}
	artDir := o.OutDir // the artifact-named figures go beside the results unless --out is given
	if artDir == "" {
		artDir = o.Dirs[0]
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join(o.Dirs[0], "figures")
	}
	paths, cmps, err := experiments.WriteSuiteFigures(o.OutDir, runs, figs)
	if terr := experiments.WriteFigureTables(os.Stdout, cmps); terr != nil && err == nil {
		err = terr
	}
	if t := experiments.SummaryTables(runs, figs); t != "" {
		fmt.Println()
		fmt.Print(t)
		p := filepath.Join(o.OutDir, "summary.md")
		if werr := os.WriteFile(p, []byte(t), 0o644); werr != nil && err == nil {
			err = werr
		}
		paths = append(paths, p)
	}
	// The paper's figures under the artifact's file names.
	apaths, notes, aerr := experiments.WriteArtifactFigures(artDir, runs)
	paths = append(paths, apaths...)
	if aerr != nil && err == nil {
		err = aerr
	}
	fmt.Println()
	for _, n := range notes {
		fmt.Println("artifact figure", n)
	}
	fmt.Println()
	for _, p := range paths {
		fmt.Println("wrote", p)
	}
	return err
}

// mergeFigures appends the figures of add not yet in figs.
func mergeFigures(figs, add []string) []string {
	for _, f := range add {
		if !slices.Contains(figs, f) {
			figs = append(figs, f)
		}
	}
	return figs
}
