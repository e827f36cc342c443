package experiments

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/queries/nexmark"
	"koala/workflows"
	"koala/workflows/plan"
)

// TestArtifactFieldsActedOn checks what the artifact's fields turn into,
// on the configs of testdata/artifact-format.
func TestArtifactFieldsActedOn(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KOALA_HOME", home)
	load := func(t *testing.T, rel string) (workflows.ExperimentInput, string) {
		t.Helper()
		in, notes, err := PrepareConfig(filepath.Join(artifactTestdata, "scripts", rel), RunOptions{SkipEnvironment: true})
		if err != nil {
			t.Fatal(err)
		}
		return in, strings.Join(notes, "\n")
	}
	eq := func(t *testing.T, what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", what, got, want)
		}
	}
	has := func(t *testing.T, notes string, subs ...string) {
		t.Helper()
		for _, s := range subs {
			if !strings.Contains(notes, s) {
				t.Errorf("notes do not mention %q:\n%s", s, notes)
			}
		}
	}

	t.Run("task migration naming only its operator", func(t *testing.T) {
		in, notes := load(t, "nexmarkJson/q6/q6ModTaskMigration.json")
		// Two steps (evacuate, place); the restated parallelism is
		// dropped, and the task and worker are chosen when each runs.
		step := workflows.ReconfigSpec{TriggerTimeSeconds: 120, Type: plan.KindTaskMigration, TargetOperator: "statefulMapper"}
		eq(t, "Reconfigurations", in.Reconfigurations, []workflows.ReconfigSpec{step, step})
		has(t, notes, `Reconfigurations[0]: no "TaskID" and no "TargetWorker"; chosen when it runs`)
	})

	t.Run("q3 measurement", func(t *testing.T) {
		in, notes := load(t, "nexmarkJson/q3/q3Lazy.json")
		eq(t, "QueryName", in.QueryName, "nexmark_query3")
		// personFilter, auctionFilter and join are q3-persons, q3-auctions, q3-join.
		eq(t, "Parallelism", in.Parallelism, map[string]int{"q3-persons": 2, "q3-auctions": 2, "q3-join": 2, "sink": 1})
		// The scale-down at 400 s is after the 240 s run: left out, as the artifact never fires it.
		eq(t, "Reconfigurations", in.Reconfigurations, []workflows.ReconfigSpec{{TriggerTimeSeconds: 100, Type: plan.KindScaleUp, TargetOperator: "q3-join", TargetParallelism: 4}})
		n := in.Producer.Nexmark
		eq(t, "event types", n.EventTypes, []string{"Person", "Auction"})
		eq(t, "NumActivePeople", n.NumActivePeople, 500)
		eq(t, "knobs", n.Knobs, map[string]float64{"HotSellerRatio": 0.3, "HotSellerRange": 50})
		// 40000 persons = 120000 auctions = 40000 cycles of the 1:3 mix
		// (4 events each), per producer; 2 producers.
		eq(t, "OutputEventNumber", n.OutputEventNumber, int64(40000*4*2))
		eq(t, "producers", in.Producer.Producers, 2)
		// 200 persons + 600 auctions per interval, then 400 + 1200.
		eq(t, "RateLimiterConfig", in.Params["RateLimiterConfig"], `{"RateLimit":[800,1600],"RateChangeInterval":[300]}`)
		eq(t, "WarmUpSnapshotDir", in.Params[control.ParamWarmUpSnapshotDir], filepath.Join(home, "warmups/q3/64_consistent"))
		eq(t, "placement", in.Params["InitialCustomTaskPlacement"], "source=192.168.7.21,source=192.168.7.22,source=192.168.7.21,source=192.168.7.22,"+
			"q3-persons=192.168.7.21,q3-persons=192.168.7.22,q3-auctions=192.168.7.21,q3-auctions=192.168.7.22,q3-join=192.168.7.21,q3-join=192.168.7.22,sink=192.168.7.21")
		has(t, notes, `"WorkDir"`, "LookupTableWarmUpDataFolder", "UseDummyField", "EnablePendingBatchTimeout", "never fires", "host mapping: 4 host(s)")
	})

	t.Run("q3 warm-up", func(t *testing.T) {
		in, notes := load(t, "nexmarkJson/q3/q3WarmUp.json")
		eq(t, "QueryName", in.QueryName, "nexmark_query3")
		eq(t, "IsWarmUp", in.Params[control.ParamIsWarmUp], "true")
		// 20000 persons (1 auction) → 20000 cycles × 4 events per producer.
		eq(t, "NumEvents", in.Params[control.ParamNumEvents], "80000")
		eq(t, "MaxEvents", in.Producer.MaxEvents, int64(160000))
		// Only the auctions are rate limited; the persons follow in the mix.
		eq(t, "RateLimiterConfig", in.Params["RateLimiterConfig"], `{"RateLimit":[900,1500],"RateChangeInterval":[100]}`)
		eq(t, "PartitionPolicy", in.Params["PartitionPolicy"], "uniform")
		has(t, notes, `"nexmark_query3_warmup" runs as query "nexmark_query3" building warm-up state`, "Person, unlimited in the artifact")
	})

	t.Run("drrs", func(t *testing.T) {
		in, notes := load(t, "nexmarkJson/q3/q3Drrs.json")
		eq(t, "protocol", in.ReconfigProtocol, workflows.ProtocolDRRS)
		eq(t, "backend", in.StateBackend, "remote-pebble")
		has(t, notes, `"uniform" starts from the same even, contiguous bucket layout`)
	})

	t.Run("q4", func(t *testing.T) {
		in, _ := load(t, "nexmarkJson/q4/q4Lazy.json")
		eq(t, "Parallelism", in.Parallelism, map[string]int{"source": 1, "q4-close": 2, "q4-average": 2, "sink": 1})
		eq(t, "target", in.Reconfigurations[0].TargetOperator, "q4-close")
		eq(t, "MaxOutOfOrdernessMs", in.Params[control.ParamMaxOutOfOrderness], "250")
		eq(t, "knobs", in.Producer.Nexmark.Knobs, map[string]float64{"NumInFlightEvents": 900, "NumActiveAuctions": 60, "HotAuctionRatio": 0.4, "HotAuctionRange": 80})
		eq(t, "RateLimiterConfig", in.Params["RateLimiterConfig"], `{"RateLimit":[4900,9800],"RateChangeInterval":[450]}`)
	})

	t.Run("q4 modified", func(t *testing.T) {
		in, notes := load(t, "nexmarkJson/q4/q4ModLazy.json")
		eq(t, "QueryName", in.QueryName, "nexmark_query4")
		eq(t, "artifact name", in.Params[ParamArtifactQueryName], "nexmark_query4_modified")
		n := in.Producer.Nexmark
		// Closed auctions come from the closing-auction stream: two events each.
		eq(t, "sellers", n.Sellers, nexmark.SellersUniform)
		eq(t, "event types", len(n.EventTypes), 0)
		eq(t, "OutputEventNumber", n.OutputEventNumber, int64(50000*2*2))
		// One rate with two intervals: the second never applies.
		eq(t, "RateLimiterConfig", in.Params["RateLimiterConfig"], `{"RateLimit":[1400],"RateChangeInterval":[600]}`)
		eq(t, "knobs", n.Knobs, map[string]float64{"NumCategories": 2000, "HotCategoryRatio": 0.1, "HotCategoryRange": 400})
		eq(t, "Parallelism", in.Parallelism, map[string]int{"q4-average": 2, "sink": 1})
		eq(t, "target", in.Reconfigurations[0].TargetOperator, "q4-average")
		has(t, notes, "last entry never applies", "closing-auction stream")
	})

	t.Run("q6 modified", func(t *testing.T) {
		in, _ := load(t, "nexmarkJson/q6/q6ModLazy.json")
		n := in.Producer.Nexmark
		eq(t, "event types", n.EventTypes, []string{"ClosedAuction"})
		eq(t, "hot seller", []any{n.HotSellerRatio, n.HotSellerRange}, []any{0.5, 40})
		eq(t, "OutputEventNumber", n.OutputEventNumber, int64(60000*2))
		eq(t, "RateLimiterConfig", in.Params["RateLimiterConfig"], `{"RateLimit":[500,1000,1500,1000,500],"RateChangeInterval":[300,450,450,450]}`)
		eq(t, "reconfigurations", len(in.Reconfigurations), 3)
		eq(t, "migration mode", in.Params["LazyByKeyCancellingTaskMigrationMode"], "eventual")

		w, notes := load(t, "nexmarkJson/q6/q6ModWarmup.json")
		eq(t, "warm-up sellers", w.Producer.Nexmark.Sellers, nexmark.SellersSequential)
		eq(t, "warm-up hot seller", w.Producer.Nexmark.HotSellerRatio, 0.0)
		eq(t, "warm-up NumEvents", w.Params[control.ParamNumEvents], "30000")
		_, limited := w.Params["RateLimiterConfig"]
		eq(t, "warm-up rate limited", limited, false)
		// Without a rate limit a warm-up generates as fast as it can.
		eq(t, "warm-up rate", w.Producer.RatePerSec, 0)
		has(t, notes, "WarmupRun draws one new seller per closed auction", "a warm-up with no rate limit generates as fast as it can")
	})

	t.Run("q5 q7 q8", func(t *testing.T) {
		q5, notes := load(t, "nexmarkJson/other/q5.json")
		eq(t, "q5 parallelism", q5.Parallelism, map[string]int{"q5-window": 2, "sink": 1})
		eq(t, "q5 target", q5.Reconfigurations[0].TargetOperator, "q5-window")
		eq(t, "q5 MaxOutOfOrdernessMs", q5.Params[control.ParamMaxOutOfOrderness], "0")
		has(t, notes, "WindowSlide", `"hottestItem" is folded`, "HottestItem: the artifact's operators")
		q7, _ := load(t, "nexmarkJson/other/q7.json")
		eq(t, "q7 parallelism", q7.Parallelism, map[string]int{"q7-window": 2, "sink": 1})
		eq(t, "q7 knobs", q7.Producer.Nexmark.Knobs, map[string]float64{"HotBidderRatio": 0.2, "HotBidderRange": 70})
		eq(t, "q7 NumActivePeople", q7.Producer.Nexmark.NumActivePeople, 700)
		q8, notes := load(t, "nexmarkJson/other/q8.json")
		eq(t, "q8 parallelism", q8.Parallelism, map[string]int{"q8-join": 2, "sink": 1})
		eq(t, "q8 target", q8.Reconfigurations[0].TargetOperator, "q8-join")
		// Persons 400 → 800 at 450, auctions 1200 → 2400 at 300.
		eq(t, "q8 RateLimiterConfig", q8.Params["RateLimiterConfig"], `{"RateLimit":[1600,2800,3200],"RateChangeInterval":[300,150]}`)
		has(t, notes, "NewUserPeriod")
		q2, _ := load(t, "nexmarkJson/other/q2.json")
		eq(t, "q2 parallelism", q2.Parallelism, map[string]int{"q2-filter": 2, "sink": 1})
	})

	t.Run("traces", func(t *testing.T) {
		az, notes := load(t, "fileReaderJson/azure/azureLazy.json")
		eq(t, "azure generator", az.Producer.Generator, "azure")
		eq(t, "azure list", az.Params[control.ParamListStateSize], "40")
		eq(t, "azure producers", az.Producer.Producers, 2)
		eq(t, "azure rate", az.Params["RateLimiterConfig"], `{"RateLimit":[700,1400],"RateChangeInterval":[500]}`)
		eq(t, "azure placement", az.Params["InitialCustomTaskPlacement"], "source=192.168.7.21,source=192.168.7.22,cpuReadingStats=192.168.7.21,cpuReadingStats=192.168.7.22,sink=192.168.7.21")
		has(t, notes, "host mapping")
		aw, notes := load(t, "fileReaderJson/azure/azureWarmUp.json")
		eq(t, "azure_warmup query", aw.QueryName, "azure")
		eq(t, "azure_warmup NumEvents", aw.Params[control.ParamNumEvents], "40000")
		has(t, notes, "UseRateLimit is false")
		bw, _ := load(t, "fileReaderJson/borg/borgWarmup.json")
		eq(t, "borg_warmup", []string{bw.QueryName, bw.Producer.Generator, bw.Params[control.ParamListStateSize]}, []string{"borg", "borg", "12"})
		tx, notes := load(t, "fileReaderJson/taxi/taxiLazy.json")
		eq(t, "taxi", []string{tx.Producer.Generator, tx.Params[control.ParamListLength]}, []string{"taxi", "90"})
		eq(t, "taxi parallelism", tx.Parallelism, map[string]int{"calculateCellId": 2, "movingMedianTripTime": 2, "sink": 1})
		has(t, notes, `"top10Route" is folded`)
		tw, _ := load(t, "fileReaderJson/taxi/taxiWarmup.json")
		eq(t, "taxi_warmup", []string{tw.QueryName, tw.Params[control.ParamIsWarmUp]}, []string{"taxi", "true"})
		sk, _ := load(t, "fileReaderJson/taxi/taxiSkew.json")
		eq(t, "taxi_skew", sk.QueryName, "taxi")
		eq(t, "taxi_skew rebalance", sk.Reconfigurations, []workflows.ReconfigSpec{{TriggerTimeSeconds: 140, Type: plan.KindRebalance, TargetOperator: "movingMedianTripTime"}})
		tv, notes := load(t, "fileReaderJson/twitch/twitchLazy.json")
		eq(t, "twitch generator", tv.Producer.Generator, "twitch")
		eq(t, "twitch parallelism", tv.Parallelism, map[string]int{"userSessions": 2, "streamViewers": 2, "streamSummary": 2, "sink": 1})
		eq(t, "twitch targets", []string{tv.Reconfigurations[0].TargetOperator, tv.Reconfigurations[1].TargetOperator, tv.Reconfigurations[2].TargetOperator},
			[]string{"streamViewers", "streamSummary", "streamViewers"})
		has(t, notes, `its generator "twitch"`)
	})
}

// TestArtifactSuiteSettings checks that an artifact suite's settings reach
// the RunSuite input and that its meaningless fields are noted.
func TestArtifactSuiteSettings(t *testing.T) {
	t.Setenv("KOALA_HOME", t.TempDir())
	s, err := LoadSuiteFor(filepath.Join(artifactTestdata, "scripts/nsdi27/evaluation/SectionA/fullSuite.json"), RunOptions{SkipEnvironment: true, Scale: Scale{Time: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "fullSuite" || !s.Input.StopOnFailure || s.Input.RetryDelaySeconds != 20 {
		t.Errorf("name %q, StopOnFailure %v, RetryDelaySeconds %d; want fullSuite, true, 20 (40 s at time scale 0.5)", s.Name, s.Input.StopOnFailure, s.Input.RetryDelaySeconds)
	}
	// Five entries: the sixth is skipped. Attempts and cool-downs per
	// entry override the suite's; cool-downs are time-scaled.
	var got [][3]any
	for _, e := range s.Input.Entries {
		got = append(got, [3]any{e.Keyword, e.MaxAttempts, e.CooldownSeconds})
	}
	want := [][3]any{{"lazy", 2, 10}, {"SAR", 3, 10}, {"lazy", 2, 3}, {"lazy", 2, 10}, {"DRRS", 2, 10}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries (keyword, attempts, cool-down) = %v, want %v", got, want)
	}
	if s.Input.Entries[0].Input.Name != "azure_lazy" || s.Input.Entries[4].Input.ReconfigProtocol != workflows.ProtocolDRRS {
		t.Errorf("entry names %q, protocol %q; want the suite's Name and drrs", s.Input.Entries[0].Input.Name, s.Input.Entries[4].Input.ReconfigProtocol)
	}
	notes := strings.Join(s.Notes, "\n")
	for _, w := range []string{"_comment", "WorkDir", "GitFetch", "RestoreBranch", "KeepFailedResults", "Skip is true", "Branch main, drrs_q3: every protocol lives in one tree here"} {
		if !strings.Contains(notes, w) {
			t.Errorf("suite notes do not mention %q:\n%s", w, notes)
		}
	}
	// A 300 s run at time scale 0.5, its trigger at 50 s.
	if in := s.Input.Entries[0].Input; in.TotalRuntimeSeconds != 150 || in.Reconfigurations[0].TriggerTimeSeconds != 50 {
		t.Errorf("time-scaled run %d s, trigger %d s; want 150 and 50", in.TotalRuntimeSeconds, in.Reconfigurations[0].TriggerTimeSeconds)
	}
}
