package experiments

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"koala/activities"
	"koala/dataplane/control"
	"koala/workflows"
)

// Warm-up data
//
// The artifact builds warm-up state with a run whose IsWarmUp is true and
// loads it into a measurement run with LoadWarmUpData; both name the
// state's directory in WarmUpDataFolder {"Pebble": dir} (relative to the
// artifact's WorkDir on every worker) and the key lookup table's in
// LookupTableWarmUpDataFolder. koala's warm-up (workflows/warmup.go) saves
// one snapshot directory holding every stateful task's Pebble checkpoint
// together with its buckets and key lookup table, so:
//
//   - WarmUpDataFolder.Pebble names the snapshot directory, under
//     $KOALA_HOME when relative (control.Home), and becomes the job's
//     WarmUpSnapshotDir;
//   - LookupTableWarmUpDataFolder is accepted and noted: the lookup table
//     is inside the snapshot;
//   - a run that loads a snapshot that is not there fails before it starts
//     (CheckEnvironment), naming the field and the warm-up config that
//     builds it.

// warmUpFolderFields are the members of WarmUpDataFolder.
var warmUpFolderFields = []string{"Pebble"}

// warmUpFolders maps WarmUpDataFolder onto the snapshot directory.
func (p *parser) warmUpFolders(in *workflows.ExperimentInput, seen map[string]bool) {
	const f = "WarmUpDataFolder"
	save, load := in.Params[control.ParamIsWarmUp] == "true", in.Params[control.ParamLoadWarmUpData] == "true"
	if raw, ok := in.Params[f]; ok {
		delete(in.Params, f) // replaced by WarmUpSnapshotDir below
		at := where(f, "")
		members, err := objectMembers([]byte(raw))
		if err != nil {
			p.errorf("%s: expected an object {\"Pebble\": \"dir\"}: %v", at, err)
			return
		}
		var dir string
		for _, m := range members {
			if m.name != "Pebble" {
				p.errorf("unknown field %q in %s%s (allowed: Pebble)", m.name, f, suggest(m.name, warmUpFolderFields))
				continue
			}
			dir, _ = p.str(m.raw, where("Pebble", f))
		}
		switch {
		case dir == "":
			if !slices.ContainsFunc(members, func(m member) bool { return m.name == "Pebble" }) {
				p.errorf("%s: missing required field \"Pebble\" (the warm-up state's directory)", at)
			}
		case seen[control.ParamWarmUpSnapshotDir]:
			p.errorf("%s and %s both name the warm-up snapshot; give one", at, where(control.ParamWarmUpSnapshotDir, ""))
		case !save && !load:
			p.notef("%s: not used (IsWarmUp and LoadWarmUpData are false)", at)
		default:
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(control.Home(), dir)
			}
			in.Params[control.ParamWarmUpSnapshotDir] = dir
			in.Params[paramWarmUpDataFolder] = raw
		}
	}
	if _, ok := in.Params["LookupTableWarmUpDataFolder"]; ok && (save || load) {
		p.notef("%s: koala's warm-up snapshot keeps each task's key lookup table with its state (WarmUpDataFolder); this folder is not used", where("LookupTableWarmUpDataFolder", ""))
	}
}

// warmUpRate lets a warm-up that sets no rate (no RatePerSecond, and no
// RateLimiterConfig or one with UseRateLimit false) generate as fast as it
// can, as the artifact's warm-ups do: its rate only decides how long
// building the state takes, and at the default rate a warm-up of a
// million events (the artifact's q6 warm-ups at --scale 0.05) would run
// for hours.
func (p *parser) warmUpRate(in *workflows.ExperimentInput, seen map[string]bool) {
	if in.Params[control.ParamIsWarmUp] != "true" || seen["RatePerSecond"] || in.Params["RateLimiterConfig"] != "" {
		return
	}
	in.Producer.RatePerSec = 0
	p.notef("%s: a warm-up with no rate limit generates as fast as it can, as the artifact's warm-ups do (RatePerSecond 0: unlimited)", where("IsWarmUp", ""))
}

// paramWarmUpDataFolder keeps the config's WarmUpDataFolder once it is
// mapped onto WarmUpSnapshotDir, for messages.
const paramWarmUpDataFolder = "WarmUpDataFolder"

// snapshotField names the field a snapshot directory came from.
func snapshotField(in workflows.ExperimentInput) string {
	if _, ok := in.Params[paramWarmUpDataFolder]; ok {
		return "WarmUpDataFolder"
	}
	return control.ParamWarmUpSnapshotDir
}

// configFile is a config's name (a path, or "<branch>:<path>" for one
// read from a git branch) and contents.
type configFile struct {
	path string
	data []byte
}

// missingSnapshotError is a run that loads a warm-up snapshot nobody has
// built. warmUp is the config that builds it (path "" when none was
// found): a suite runs it first (suite_warmup.go).
type missingSnapshotError struct {
	field, dir string
	warmUp     configFile
}

func (e *missingSnapshotError) Error() string {
	build := "`koala run` of the config with IsWarmUp true and the same " + e.field
	if e.warmUp.path != "" {
		build = "`koala run " + e.warmUp.path + "`"
	}
	return fmt.Sprintf("field %q: no warm-up snapshot at %s (LoadWarmUpData is true); build it first with %s, using the same --scale", e.field, e.dir, build)
}

// checkWarmUp checks that a run's warm-up snapshot is there to load, or
// not yet there to build. config is the config's path: the directory in
// which the warm-up config that builds a missing snapshot is looked for
// (o.siblings lists it instead when set).
func checkWarmUp(config string, in workflows.ExperimentInput, o RunOptions) error {
	dir := in.Params[control.ParamWarmUpSnapshotDir]
	if dir == "" {
		return nil
	}
	field := snapshotField(in)
	manifest := filepath.Join(dir, activities.SnapshotManifestFile)
	_, err := os.Stat(manifest)
	switch {
	case in.Params[control.ParamLoadWarmUpData] == "true" && errors.Is(err, os.ErrNotExist) && o.builtBefore[dir] != "":
		return nil // a warm-up earlier in the suite builds it
	case in.Params[control.ParamIsWarmUp] == "true" && o.builtBefore[dir] != "":
		return fmt.Errorf("field %q: the warm-up snapshot %s is built earlier in this suite (by %s); a second build would find it there and fail: leave one of them out", field, dir, o.builtBefore[dir])
	case in.Params[control.ParamLoadWarmUpData] == "true" && errors.Is(err, os.ErrNotExist):
		siblings := o.siblings
		if siblings == nil {
			siblings = func() []configFile { return filesBeside(config) }
		}
		return &missingSnapshotError{field: field, dir: dir, warmUp: findWarmUpConfig(siblings(), in.Params[paramWarmUpDataFolder], in.StateBackend)}
	case in.Params[control.ParamLoadWarmUpData] == "true" && err != nil:
		return fmt.Errorf("field %q: warm-up snapshot %s: %w", field, dir, err)
	case in.Params[control.ParamIsWarmUp] == "true" && err == nil && !o.keepBuilt:
		return fmt.Errorf("field %q: a warm-up snapshot exists at %s already; remove that directory to build it again", field, dir)
	}
	return nil
}

// filesBeside reads the .json files in config's directory.
func filesBeside(config string) []configFile {
	if config == "" {
		return nil
	}
	paths, _ := filepath.Glob(filepath.Join(filepath.Dir(config), "*.json"))
	var out []configFile
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			out = append(out, configFile{path: p, data: data})
		}
	}
	return out
}

// findWarmUpConfig picks among files the warm-up config that builds folder
// (a WarmUpDataFolder as written): IsWarmUp true, or a *_warmup
// QueryName, with an equal WarmUpDataFolder; of several, the first with
// the state backend the loading run uses (the artifact keeps a local and a
// remote-pebble warm-up of one folder side by side). Its path is "" when
// none is.
func findWarmUpConfig(files []configFile, folder, backend string) configFile {
	if folder == "" {
		return configFile{}
	}
	var want any
	if json.Unmarshal([]byte(folder), &want) != nil {
		return configFile{}
	}
	var found configFile
	for _, f := range files {
		var c struct {
			QueryName        string
			IsWarmUp         bool
			StateBackendType string
			WarmUpDataFolder any
		}
		if json.Unmarshal(f.data, &c) != nil || !(c.IsWarmUp || strings.HasSuffix(c.QueryName, "_warmup")) {
			continue
		}
		if fmt.Sprint(c.WarmUpDataFolder) != fmt.Sprint(want) {
			continue
		}
		if c.StateBackendType == backend {
			return f
		}
		if found.path == "" {
			found = f
		}
	}
	return found
}
