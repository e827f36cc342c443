package experiments

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koala/activities"
	"koala/dataplane/control"
)

func wantErrIn(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want an error with %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

func TestScaleFlags(t *testing.T) {
	wantErrIn(t, Scale{Factor: -0.5, Time: 1}.CheckSet(), "--scale -0.5", "must be a number > 0")
	wantErrIn(t, Scale{Factor: 1, Time: -2}.CheckSet(), "--time-scale -2", "must be a number > 0")
	wantErrIn(t, Scale{Factor: 0, Time: 1}.CheckSet(), "--scale 0", "must be a number > 0")
	if err := (Scale{Factor: 0.05, Time: 0.25}).CheckSet(); err != nil {
		t.Fatal(err)
	}
	in, err := ParseConfig("c.json", []byte(`{"QueryName": "counter", "RatePerSecond": 1000, "NumKeys": 2000, "TotalRuntimeSeconds": 100,
		"RateLimiterConfig": {"RateLimit": [100, 300], "RateChangeInterval": [40]}, "DummyFieldSize": 64, "NumEvents": 50000,
		"Reconfigurations": [{"TriggerTimeSeconds": 99, "Type": "scaleup", "TargetOperator": "counter", "TargetParrallelism": 4}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (Scale{Factor: -1}).Apply(&in); err == nil {
		t.Fatal("Apply took a negative scale")
	}
	note, err := Scale{Factor: 0.1, Time: 0.5}.Apply(&in)
	if err != nil || note == "" {
		t.Fatalf("Apply: %q, %v", note, err)
	}
	got := []any{in.Producer.RatePerSec, in.Producer.NumKeys, in.TotalRuntimeSeconds, in.Reconfigurations[0].TriggerTimeSeconds,
		in.Params["RateLimiterConfig"], in.Params["DummyFieldSize"], in.Params["NumEvents"]}
	// 99 s × 0.5 rounds to 50 s, the run's end: it stays one second before.
	want := []any{100, 200, 50, 49, `{"RateLimit":[10,30],"RateChangeInterval":[20]}`, "6", "5000"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("scaled %v, want %v", got, want)
			break
		}
	}
}

func TestArtifactBadInput(t *testing.T) {
	base := func(extra string) []byte {
		return []byte(`{"QueryName": "nexmark_query6_modified", "WorkDir": "/w", "StatefulMapperParallelism": 2` + extra + `}`)
	}
	cases := []struct {
		name, config string
		want         []string
	}{
		{"hot seller ratio above 1", `, "NexmarkLogicalSourceConfigs": [{"EventType": "ClosedAuction", "NexmarkSourceConfig": {"HotSellerRatio": 1.5}}]`,
			[]string{`field "HotSellerRatio" in NexmarkLogicalSourceConfigs[0].NexmarkSourceConfig`, "1.5 is out of range (a share of the draws between 0 and 1)"}},
		{"hot seller ratio negative", `, "NexmarkLogicalSourceConfigs": [{"EventType": "ClosedAuction", "NexmarkSourceConfig": {"HotSellerRatio": -0.1}}]`,
			[]string{`field "HotSellerRatio"`, "-0.1 is out of range"}},
		{"nearest source field", `, "NexmarkLogicalSourceConfigs": [{"EventType": "ClosedAuction", "NexmarkSourceConfig": {"HotSelerRatio": 0.1}}]`,
			[]string{`unknown field "HotSelerRatio"`, `did you mean "HotSellerRatio"?`}},
		{"nearest top-level field", `, "WarmUpDataFoldr": {"Pebble": "x"}`, []string{`unknown field "WarmUpDataFoldr"`, `did you mean "WarmUpDataFolder"?`}},
		{"closed auctions mixed", `, "NexmarkLogicalSourceConfigs": [{"EventType": "ClosedAuction"}, {"EventType": "Bid"}]`,
			[]string{"ClosedAuction is a stream of its own"}},
		{"rate steps", `, "RateLimiterConfig": {"UseRateLimit": true, "RateLimit": [1], "RateChangeInterval": [5, 5, 5]}`,
			[]string{"RateChangeInterval: has 3 entries, RateLimit has 1"}},
		{"use rate limit type", `, "RateLimiterConfig": {"UseRateLimit": "yes", "RateLimit": [1]}`, []string{"UseRateLimit: expected true or false, got string"}},
		{"warm-up folder", `, "IsWarmUp": true, "WarmUpDataFolder": {"Pebbel": "x"}`, []string{`unknown field "Pebbel" in WarmUpDataFolder`, `did you mean "Pebble"?`}},
		{"duration", `, "WatermarkInterval": "often"`, []string{`field "WatermarkInterval": "often" is not a duration`}},
		{"warm-up query not a warm-up", `, "QueryName": "azure_warmup", "IsWarmUp": false`, []string{`"azure_warmup" is the artifact's warm-up dataflow, but IsWarmUp is false`}},
		{"trace of another query", `, "QueryName": "azure", "EventType": "Borg"`, []string{`field "EventType": "Borg" is not the trace query "azure" reads`}},
		{"task migration without operator or task", `, "Reconfigurations": [{"TriggerTimeSeconds": 5, "Type": "task-migration", "TargetWorker": "w2"}]`,
			[]string{`Reconfigurations[0]: a task-migration needs "TargetOperator" (its task and worker are then chosen when it runs) or "TaskID"`}},
		{"task migration changes parallelism", `, "Reconfigurations": [{"TriggerTimeSeconds": 5, "Type": "task-migration", "TargetOperator": "statefulMapper", "TargetParrallelism": 3}]`,
			[]string{`task-migration of operator "statefulMapper" keeps its parallelism, which is 2 then; TargetParrallelism 3 differs`}},
		{"rebalance changes parallelism", `, "Reconfigurations": [{"TriggerTimeSeconds": 5, "Type": "rebalance", "TargetOperator": "statefulMapper", "TargetParrallelism": 3}]`,
			[]string{"rebalance of operator \"statefulMapper\" keeps its parallelism, which is 2 then; TargetParrallelism 3 differs"}},
		{"drrs version", `, "ReconfigProtocol": "stop-and-restart", "LazyProtocolVersion": "drrs"`, []string{`"drrs" needs ReconfigProtocol "lazy"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A later "QueryName" would repeat the field: replace it.
			config := base(c.config)
			if strings.Contains(c.config, `"QueryName"`) {
				config = []byte(strings.Replace(string(config), `"QueryName": "nexmark_query6_modified", `, "", 1))
				config = []byte(strings.Replace(string(config), `"StatefulMapperParallelism": 2`, `"SinkParallelism": 1`, 1))
			}
			_, err := ParseConfig("c.json", config)
			wantErrIn(t, err, c.want...)
		})
	}
}

// TestHostMappingOff: with host mapping off, every host a config places
// tasks or producers on must be the stack's.
func TestHostMappingOff(t *testing.T) {
	path := filepath.Join(artifactTestdata, "scripts/fileReaderJson/azure/azureLazy.json")
	off := RunOptions{SkipEnvironment: true, NoHostMapping: true, StackHosts: []string{"127.0.0.1", "192.168.7.1"}}
	_, _, err := PrepareConfig(path, off)
	wantErrIn(t, err, `field "InitialCustomTaskPlacement": 192.168.7.21, 192.168.7.22 are not a host of the stack (stack hosts: 127.0.0.1, 192.168.7.1)`,
		`field "WorkerIPs"`, "host mapping is off")
	if strings.Contains(err.Error(), `field "ProducerIPs"`) {
		t.Errorf("ProducerIPs names a stack host only, yet: %v", err)
	}
	off.StackHosts = append(off.StackHosts, "192.168.7.21", "192.168.7.22")
	if _, notes, err := PrepareConfig(path, off); err != nil || strings.Contains(strings.Join(notes, "\n"), "host mapping") {
		t.Fatalf("a stack with every host: %v, notes %q", err, notes)
	}
	if _, _, err := PrepareConfig(path, RunOptions{SkipEnvironment: true, StackHosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatalf("host mapping on: %v", err)
	}
}

// TestWarmUpSnapshotChecks: a run that loads a missing snapshot fails
// before it starts, naming the field and the warm-up config that builds
// it; a warm-up whose snapshot exists fails too.
func TestWarmUpSnapshotChecks(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KOALA_HOME", home)
	dir := filepath.Join(artifactTestdata, "scripts/fileReaderJson/azure")
	measure, warm := filepath.Join(dir, "azureLazy.json"), filepath.Join(dir, "azureWarmUp.json")
	o := RunOptions{Scale: Scale{Factor: 0.5}}
	_, _, err := PrepareConfig(measure, o)
	snap := filepath.Join(home, "warmups/azure/64_consistent-scale0.5")
	wantErrIn(t, err, `field "WarmUpDataFolder": no warm-up snapshot at `+snap, "build it first with `koala run "+warm+"`", "same --scale")
	if _, _, err := PrepareConfig(warm, o); err != nil {
		t.Fatalf("warm-up before its snapshot exists: %v", err)
	}
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, activities.SnapshotManifestFile), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	in, notes, err := PrepareConfig(measure, o)
	if err != nil {
		t.Fatalf("with the snapshot: %v", err)
	}
	if in.Params[control.ParamWarmUpSnapshotDir] != snap {
		t.Errorf("snapshot dir %q, want %q", in.Params[control.ParamWarmUpSnapshotDir], snap)
	}
	// The artifact's trace files are not here: the synthetic generator
	// stands in, and says so.
	if _, ok := in.Params["FilePath"]; ok || !strings.Contains(strings.Join(notes, "\n"), `the synthetic "azure" generator makes the records instead`) {
		t.Errorf("FilePath %q, notes %q", in.Params["FilePath"], notes)
	}
	_, _, err = PrepareConfig(warm, o)
	wantErrIn(t, err, `field "WarmUpDataFolder": a warm-up snapshot exists at `+snap+" already")

	// In a suite, a warm-up before the run that loads its snapshot builds
	// it; after it, it does not.
	if err := os.RemoveAll(snap); err != nil {
		t.Fatal(err)
	}
	absWarm, _ := filepath.Abs(warm)
	absMeasure, _ := filepath.Abs(measure)
	suite := filepath.Join(t.TempDir(), "suite.json")
	write := func(first, second string) {
		body := `{"Experiments": [{"ConfigPath": "` + first + `", "ResultKeyword": "a"}, {"ConfigPath": "` + second + `", "ResultKeyword": "b"}]}`
		if err := os.WriteFile(suite, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(absWarm, absMeasure)
	if _, err := LoadSuiteFor(suite, o); err != nil {
		t.Fatalf("warm-up, then the run that loads it: %v", err)
	}
	// Listed after the run that loads it, the warm-up beside that run is
	// run first (suite_warmup.go), so the listed one would build it twice.
	write(absMeasure, absWarm)
	_, err = LoadSuiteFor(suite, o)
	wantErrIn(t, err, "Experiments[1].ConfigPath", "is built earlier in this suite (by "+absWarm+")", "leave one of them out")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, activities.SnapshotManifestFile), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}

	// Trace files that are there are replayed from under $KOALA_HOME.
	for _, f := range []string{"traces/azure/part0.csv", "traces/azure/part1.csv"} {
		p := filepath.Join(home, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, _, err = PrepareConfig(measure, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, "traces/azure/part0.csv") + "," + filepath.Join(home, "traces/azure/part1.csv"); in.Params["FilePath"] != want {
		t.Errorf("FilePath %q, want %q", in.Params["FilePath"], want)
	}
}

func TestArtifactSuiteBadInput(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "configs", "c.json")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(`{"QueryName": "counter"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ body, want string }{
		{`{"CooldownSecond": 5, "Experiments": [{"ConfigPath": "configs/c.json", "ResultKeyword": "a"}]}`, `unknown field "CooldownSecond" (did you mean "CooldownSeconds"?)`},
		{`{"Experiments": [{"ConfigPath": "configs/c.json", "ResultKeywrd": "a"}]}`, `Experiments[0]: unknown field "ResultKeywrd" (did you mean "ResultKeyword"?)`},
		{`{"MaxAttempts": 0, "Experiments": [{"ConfigPath": "configs/c.json", "ResultKeyword": "a"}]}`, "MaxAttempts: 0 is out of range (a whole number between 1 and 100)"},
		{`{"Experiments": [{"ConfigPath": "configs/c.json", "ResultKeyword": "a", "CooldownSeconds": -1}]}`, "Experiments[0].CooldownSeconds: -1 is out of range"},
		{`{"StopOnFailure": "no", "Experiments": [{"ConfigPath": "configs/c.json", "ResultKeyword": "a"}]}`, "StopOnFailure: expected true or false, got string"},
		{`{"Experiments": [{"Config": "configs/c.json", "ConfigPath": "configs/c.json", "ResultKeyword": "a"}]}`, `"Config" and "ConfigPath" are the same field; give one`},
		{`{"Experiments": [{"ConfigPath": "configs/nope.json", "ResultKeyword": "a", "Branch": "drrs"}]}`, `the artifact keeps it on branch "drrs"`},
		{`{"Experiments": [{"ConfigPath": "configs/c.json", "ResultKeyword": "a", "Skip": true}]}`, "every experiment is skipped"},
	}
	for i, c := range cases {
		p := filepath.Join(dir, "deeper", "suite.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadSuiteFor(p, RunOptions{SkipEnvironment: true})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: error %v, want %q", i, err, c.want)
		}
	}
}
