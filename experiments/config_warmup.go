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

// checkWarmUp checks that a run's warm-up snapshot is there to load, or
// not yet there to build. config is the config's path: the directory in
// which the warm-up config that builds a missing snapshot is looked for.
func checkWarmUp(config string, in workflows.ExperimentInput, builtBefore map[string]bool) error {
	dir := in.Params[control.ParamWarmUpSnapshotDir]
	if dir == "" {
		return nil
	}
	field := snapshotField(in)
	manifest := filepath.Join(dir, activities.SnapshotManifestFile)
	_, err := os.Stat(manifest)
	switch {
	case in.Params[control.ParamLoadWarmUpData] == "true" && errors.Is(err, os.ErrNotExist) && builtBefore[dir]:
		return nil // a warm-up earlier in the suite builds it
	case in.Params[control.ParamLoadWarmUpData] == "true" && errors.Is(err, os.ErrNotExist):
		build := "`koala run` of the config with IsWarmUp true and the same " + field
		if w := findWarmUpConfig(config, in.Params[paramWarmUpDataFolder]); w != "" {
			build = "`koala run " + w + "`"
		}
		return fmt.Errorf("field %q: no warm-up snapshot at %s (LoadWarmUpData is true); build it first with %s, using the same --scale", field, dir, build)
	case in.Params[control.ParamLoadWarmUpData] == "true" && err != nil:
		return fmt.Errorf("field %q: warm-up snapshot %s: %w", field, dir, err)
	case in.Params[control.ParamIsWarmUp] == "true" && err == nil:
		return fmt.Errorf("field %q: a warm-up snapshot exists at %s already; remove that directory to build it again", field, dir)
	}
	return nil
}

// findWarmUpConfig looks in config's directory for the warm-up config
// that builds folder (a WarmUpDataFolder as written): IsWarmUp true, or a
// *_warmup QueryName, with an equal WarmUpDataFolder. "" when none is.
func findWarmUpConfig(config, folder string) string {
	if config == "" || folder == "" {
		return ""
	}
	var want any
	if json.Unmarshal([]byte(folder), &want) != nil {
		return ""
	}
	paths, _ := filepath.Glob(filepath.Join(filepath.Dir(config), "*.json"))
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var c struct {
			QueryName        string
			IsWarmUp         bool
			WarmUpDataFolder any
		}
		if json.Unmarshal(data, &c) != nil || !(c.IsWarmUp || strings.HasSuffix(c.QueryName, "_warmup")) {
			continue
		}
		if fmt.Sprint(c.WarmUpDataFolder) == fmt.Sprint(want) {
			return path
		}
	}
	return ""
}
