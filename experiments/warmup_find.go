package experiments

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"koala/activities"
	"koala/dataplane/control"
	"koala/workflows"
)

// The warm-up of a config
//
// `koala warmup CONFIG` builds the warm-up snapshot of CONFIG once, and
// `koala compare` builds a missing one before its runs. CONFIG is either
// the warm-up config itself (IsWarmUp) or a config that loads the
// snapshot (LoadWarmUpData); for the latter the warm-up config is the one
// a suite would run first (suite_warmup.go): found beside it by its
// WarmUpDataFolder, prepared with the same options, and building the same
// directory. A snapshot named by its query and NumEvents (no folder) is
// built by the IsWarmUp config beside it that snapshots into the same
// directory.

// WarmUpTarget is a warm-up snapshot and the warm-up config that builds it.
type WarmUpTarget struct {
	// Dir is the snapshot directory (absolute); Built says its manifest
	// is there.
	Dir   string
	Built bool
	// Config is the warm-up config's path ("" when none was found: a
	// loading config whose snapshot is built, with no warm-up config
	// beside it), Input that config prepared to run.
	Config string
	Input  workflows.ExperimentInput
	// Loader is the config that loads the snapshot ("" when the config
	// given was the warm-up itself).
	Loader string
}

// FindWarmUp prepares the config at path with o (PrepareConfig) and
// returns the warm-up snapshot it builds or loads. A loading config whose
// snapshot is missing and has no warm-up config beside it is the error a
// run of it gets (missingSnapshotError); so is a config that neither
// builds nor loads a snapshot. Notes are returned even with an error.
func FindWarmUp(path string, o RunOptions) (WarmUpTarget, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return WarmUpTarget{}, nil, fmt.Errorf("config: %w", err)
	}
	o.builtBefore, o.keepBuilt = map[string]string{}, true
	l, err := prepareEntry(configSource{configFile: configFile{path: path, data: data}}, o)
	if err != nil {
		return WarmUpTarget{}, l.notes, err
	}
	if len(l.warmUps) > 0 { // loads a missing snapshot, and its warm-up is found
		w := l.warmUps[0]
		return WarmUpTarget{Dir: w.dir, Config: w.path, Input: w.in, Loader: path}, l.notes, nil
	}
	in := l.in
	save := in.Params[control.ParamIsWarmUp] == "true"
	if !save && in.Params[control.ParamLoadWarmUpData] != "true" {
		return WarmUpTarget{}, l.notes, fmt.Errorf("config %s neither builds a warm-up snapshot (IsWarmUp) nor loads one (LoadWarmUpData)", path)
	}
	dir, err := snapshotDirOf(in)
	if err != nil {
		return WarmUpTarget{}, l.notes, fmt.Errorf("config %s: %w", path, err)
	}
	t := WarmUpTarget{Dir: dir, Built: snapshotBuilt(dir)}
	if save {
		t.Config, t.Input = path, in
		return t, l.notes, nil
	}
	t.Loader = path
	files := filesBeside(path)
	if f := findWarmUpConfig(files, in.Params[paramWarmUpDataFolder], in.StateBackend); f.path != "" {
		w, wnotes, ok, werr := prepareBuilder(f, dir, o)
		if werr != nil {
			return WarmUpTarget{}, append(l.notes, wnotes...), werr
		}
		if ok {
			t.Config, t.Input = w.path, w.in
			l.notes = append(l.notes, wnotes...)
		}
	} else if in.Params[control.ParamWarmUpSnapshotDir] == "" {
		if w, wnotes, ok := findDefaultDirWarmUp(files, dir, o); ok {
			t.Config, t.Input = w.path, w.in
			l.notes = append(l.notes, wnotes...)
		}
	}
	if !t.Built && t.Config == "" {
		// The snapshot named by QueryName and NumEvents (checkWarmUp
		// only sees one named by WarmUpDataFolder or WarmUpSnapshotDir).
		return WarmUpTarget{}, l.notes, fmt.Errorf("config %s: %w", path, &missingSnapshotError{field: control.ParamNumEvents, dir: dir})
	}
	return t, l.notes, nil
}

// findDefaultDirWarmUp picks among files the warm-up config that builds
// dir, a snapshot named by its query and NumEvents rather than by a
// folder (findWarmUpConfig): the first with IsWarmUp true that, prepared
// with o, snapshots into dir. Files that do not prepare are skipped.
func findDefaultDirWarmUp(files []configFile, dir string, o RunOptions) (loadedWarmUp, []string, bool) {
	o.siblings = nil
	for _, f := range files {
		var c struct{ IsWarmUp bool }
		if json.Unmarshal(f.data, &c) != nil || !c.IsWarmUp {
			continue
		}
		in, notes, err := prepareData(f.path, f.data, o)
		if err != nil || in.Params[control.ParamWarmUpSnapshotDir] != "" {
			continue
		}
		if d, err := snapshotDirOf(in); err == nil && d == dir {
			return loadedWarmUp{path: f.path, dir: dir, in: in}, notes, true
		}
	}
	return loadedWarmUp{}, nil, false
}

// snapshotDirOf is the snapshot directory a warm-up or loading run uses:
// its WarmUpSnapshotDir, or the default of its query and NumEvents.
func snapshotDirOf(in workflows.ExperimentInput) (string, error) {
	var n int64
	if v := in.Params[control.ParamNumEvents]; v != "" {
		var err error
		if n, err = strconv.ParseInt(v, 10, 64); err != nil {
			return "", fmt.Errorf("%s %q: %w", control.ParamNumEvents, v, err)
		}
	}
	return activities.SnapshotDir(in.Params[control.ParamWarmUpSnapshotDir], in.QueryName, n)
}

// snapshotBuilt says whether dir holds a snapshot's manifest.
func snapshotBuilt(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, activities.SnapshotManifestFile))
	return err == nil
}

// RemoveSnapshot removes the snapshot in dir, so that its warm-up can
// build it again. It refuses a directory without a snapshot manifest: dir
// comes from a config, and nothing else there is removed.
func RemoveSnapshot(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, activities.SnapshotManifestFile)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove snapshot %s: no %s there; not removing a directory that is not a snapshot", dir, activities.SnapshotManifestFile)
		}
		return fmt.Errorf("remove snapshot %s: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove snapshot %s: %w", dir, err)
	}
	return nil
}
