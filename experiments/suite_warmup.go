package experiments

import (
	"errors"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"koala/dataplane/control"
	"koala/workflows"
)

// Warm-ups a suite runs first
//
// The artifact's suites load warm-up state that its cluster built once,
// before any suite ran ("the warm-up data for every query is already
// generated"); none of them lists its warm-ups. On a fresh machine every
// such entry would fail on its missing snapshot. So when a suite entry
// loads a snapshot that is neither on disk nor built by an earlier entry,
// and the config that builds it is found beside the entry's config (same
// directory, same branch: the artifact keeps each warm-up beside the
// configs that load it), the suite runs that warm-up right before the
// entry, with the entry's attempts and cool-down, and a note says so. A
// snapshot with no warm-up config found stays an error naming the field.
// `koala run` of a single config does not do this: it names the command
// that builds the snapshot instead. `koala warmup` and `koala compare`
// find the warm-up the same way (FindWarmUp, warmup_find.go) and build it.

// loadedWarmUp is a warm-up config a suite runs before an entry.
type loadedWarmUp struct {
	path string // as named in notes: a file, or "<branch>:<path>"
	dir  string // the snapshot directory it builds
	in   workflows.ExperimentInput
}

// prepareEntry prepares a suite entry's config with o (prepareData) and,
// when it loads a snapshot nobody builds, the warm-up that builds it.
func prepareEntry(src configSource, o RunOptions) (loadedConfig, error) {
	o.siblings = src.siblings
	in, notes, err := prepareData(src.path, src.data, o)
	l := loadedConfig{in: in, notes: notes}
	var missing *missingSnapshotError
	if errors.As(err, &missing) && missing.warmUp.path != "" {
		w, wnotes, ok, werr := prepareBuilder(missing.warmUp, missing.dir, o)
		l.notes = append(l.notes, wnotes...)
		switch {
		case werr != nil:
			err = errors.Join(err, werr)
		case ok:
			o.builtBefore[missing.dir] = missing.warmUp.path
			l.warmUps = append(l.warmUps, w)
			l.in, l.notes, err = prepareData(src.path, src.data, o)
			l.notes = append(wnotes, l.notes...)
		}
	}
	if dir := l.in.Params[control.ParamWarmUpSnapshotDir]; err == nil && dir != "" && l.in.Params[control.ParamIsWarmUp] == "true" {
		o.builtBefore[dir] = src.path
	}
	return l, err
}

// prepareBuilder prepares f, the warm-up config found for snapshot dir,
// with o; ok is false when, so prepared, it does not build dir.
func prepareBuilder(f configFile, dir string, o RunOptions) (w loadedWarmUp, notes []string, ok bool, err error) {
	o.siblings = nil // a warm-up loads no snapshot: nothing to look up beside it
	in, notes, err := prepareData(f.path, f.data, o)
	if err != nil {
		return w, notes, false, err
	}
	// Scaled alike, both name the same directory; anything else is a
	// warm-up that does not build this snapshot.
	if in.Params[control.ParamIsWarmUp] != "true" || in.Params[control.ParamWarmUpSnapshotDir] != dir {
		return w, notes, false, nil
	}
	return loadedWarmUp{path: f.path, dir: dir, in: in}, notes, true, nil
}

// warmUpKeyword is the keyword of a warm-up a suite runs first: its
// config's base name, made unique among the suite's keywords so far.
func warmUpKeyword(config string, seen map[string]int) string {
	base := strings.TrimSuffix(path.Base(filepath.ToSlash(config)), ".json")
	kw := "warmup_" + base
	for n := 2; ; n++ {
		if _, used := seen[kw]; !used {
			return kw
		}
		kw = "warmup_" + base + "_" + strconv.Itoa(n)
	}
}
