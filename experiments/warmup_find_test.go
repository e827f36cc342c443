package experiments

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koala/activities"
	"koala/dataplane/control"
)

// writeManifest makes dir look like a built snapshot.
func writeManifest(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, activities.SnapshotManifestFile), []byte(`{"keys": 5}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFindWarmUpByFolder: `koala warmup` of a config that loads a
// snapshot named by WarmUpDataFolder finds the warm-up config beside it
// (scaled alike), or is given the warm-up config itself; a built snapshot
// is reported, not an error, and still names its warm-up (--rebuild).
func TestFindWarmUpByFolder(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KOALA_HOME", home)
	dir := filepath.Join(artifactTestdata, "scripts/fileReaderJson/azure")
	measure, warm := filepath.Join(dir, "azureLazy.json"), filepath.Join(dir, "azureWarmUp.json")
	o := RunOptions{Scale: Scale{Factor: 0.5}}
	snap := filepath.Join(home, "warmups/azure/64_consistent-scale0.5")
	check := func(what, config string, wantBuilt bool, wantLoader string) {
		t.Helper()
		got, _, err := FindWarmUp(config, o)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.Dir != snap || got.Built != wantBuilt || got.Config != warm || got.Loader != wantLoader {
			t.Errorf("%s: dir %q built %v config %q loader %q; want %q %v %q %q", what, got.Dir, got.Built, got.Config, got.Loader, snap, wantBuilt, warm, wantLoader)
		}
		if got.Input.Params[control.ParamIsWarmUp] != "true" || got.Input.Params[control.ParamWarmUpSnapshotDir] != snap {
			t.Errorf("%s: the warm-up's input has IsWarmUp %q and snapshot dir %q", what, got.Input.Params[control.ParamIsWarmUp], got.Input.Params[control.ParamWarmUpSnapshotDir])
		}
	}
	check("loading config, snapshot missing", measure, false, measure)
	check("warm-up config, snapshot missing", warm, false, "")
	writeManifest(t, snap)
	check("loading config, snapshot built", measure, true, measure)
	check("warm-up config, snapshot built", warm, true, "")
	// A run of the warm-up still refuses to overwrite the snapshot.
	_, _, err := PrepareConfig(warm, o)
	wantErrIn(t, err, "a warm-up snapshot exists at "+snap+" already")
}

// TestFindWarmUpByQueryAndNumEvents: a snapshot named by its query and
// NumEvents (no folder) is built by the IsWarmUp config beside the loading
// one with the same NumEvents, not by one with other NumEvents; with none,
// the error names the snapshot and NumEvents.
func TestFindWarmUpByQueryAndNumEvents(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KOALA_HOME", home)
	cfgs := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(cfgs, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const common = `"QueryName": "counter", "StateBackendType": "pebble", "CounterParallelism": 2, "TotalRuntimeSeconds": 60`
	measure := write("measure.json", `{`+common+`, "LoadWarmUpData": true, "NumEvents": 5000}`)
	snap := filepath.Join(home, "snapshots/counter/5000")

	_, _, err := FindWarmUp(measure, RunOptions{})
	wantErrIn(t, err, `field "NumEvents": no warm-up snapshot at `+snap)

	write("warm-other.json", `{`+common+`, "IsWarmUp": true, "NumEvents": 7000}`)
	warm := write("warm.json", `{`+common+`, "IsWarmUp": true, "NumEvents": 5000}`)
	got, _, err := FindWarmUp(measure, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Config != warm || got.Dir != snap || got.Built || got.Loader != measure {
		t.Errorf("got config %q dir %q built %v loader %q; want %q %q false %q", got.Config, got.Dir, got.Built, got.Loader, warm, snap, measure)
	}
	if n := got.Input.Params[control.ParamNumEvents]; n != "5000" {
		t.Errorf("the warm-up's NumEvents %q, want 5000", n)
	}
	writeManifest(t, snap)
	if got, _, err = FindWarmUp(measure, RunOptions{}); err != nil || !got.Built || got.Config != warm {
		t.Errorf("built: %+v, %v; want built, config %q", got, err, warm)
	}

	neither := write("plain.json", `{`+common+`}`)
	_, _, err = FindWarmUp(neither, RunOptions{})
	wantErrIn(t, err, "neither builds a warm-up snapshot (IsWarmUp) nor loads one (LoadWarmUpData)")
}

// TestRemoveSnapshot removes a snapshot and nothing that is not one.
func TestRemoveSnapshot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := RemoveSnapshot(dir)
	if err == nil || !strings.Contains(err.Error(), "not a snapshot") {
		t.Fatalf("a directory without a manifest: %v, want a refusal", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the refused directory is gone: %v", err)
	}
	writeManifest(t, dir)
	if err := RemoveSnapshot(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("snapshot still there: %v", err)
	}
}
