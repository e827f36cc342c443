package experiments

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "koala/queries/traces" // the trace queries the artifact's configs name
)

// The artifact's configs and suites
//
// testdata/artifact-format holds configs and suites written in the Koala
// artifact's format (scripts/… layout: suites find their configs relative
// to scripts/), using every field, query name, operator name and suite
// field the artifact's own files use. TestArtifactFormat parses each and
// checks the suites as `koala suite --check` does; with KOALA_ARTIFACT_DIR
// pointing at a checkout of the artifact, it does the same for the
// artifact's scripts/nexmarkJson, scripts/fileReaderJson and
// scripts/nsdi27 files.

const artifactTestdata = "testdata/artifact-format"

// artifactNames are the names the artifact's files use (issue 20's list
// and the rest the parser found in them): each must appear in the testdata.
var artifactNames = []string{
	// Config fields.
	"QueryName", "WorkDir", "AllNodeIPs", "KafkaClusterIPs", "ProducerIPs", "WorkerIPs", "NexmarkLogicalSourceConfigs",
	"EventType", "NexmarkSourceConfig", "RateLimiterConfig", "UseRateLimit", "RateLimit", "RateChangeInterval",
	"HotSellerRatio", "HotSellerRange", "HotAuctionRatio", "HotAuctionRange", "HotBidderRatio", "HotBidderRange",
	"HotCategoryRatio", "HotCategoryRange", "NumActivePeople", "NumActiveAuctions", "NumCategories", "NumInFlightEvents",
	"NumEvents", "OutputEventNumber", "WarmupRun", "TotalRuntimeSeconds", "ReconfigProtocol", "LazyProtocolVersion",
	"LazyByKeyCancellingTaskMigrationMode", "LazyByKeyGradualMigrationBatchSize", "NumBuckets", "PartitionPolicy",
	"BufferSize", "BatchSize", "StateBackendType", "RemotePebbleAddrs", "PebbleEnableConcurrentGetMany",
	"PebbleGetManyMaxConcurrency", "PebbleGetManyBatchSize", "IsWarmUp", "LoadWarmUpData", "WarmUpDataFolder", "Pebble",
	"LookupTableWarmUpDataFolder", "Reconfigurations", "TriggerTimeSeconds", "Type", "TargetOperator", "TargetParrallelism",
	"InitialCustomTaskPlacement", "FilePath", "DummyFieldSize", "UseDummyField", "ListStateSize", "ListLength",
	"MaxAllowedDelay", "WatermarkInterval", "WindowDuration", "WindowSlide", "NewUserPeriod", "EnablePendingBatchTimeout",
	// Query names.
	"nexmark_query1", "nexmark_query2", "nexmark_query3", "nexmark_query3_warmup", "nexmark_query4", "nexmark_query4_modified",
	"nexmark_query5", "nexmark_query6_modified", "nexmark_query7", "nexmark_query8",
	"azure", "azure_warmup", "borg", "borg_warmup", "taxi", "taxi_warmup", "taxi_skew", "twitch",
	// Event types and enumerations.
	"Person", "Auction", "Bid", "ClosedAuction", "Azure", "Borg", "Taxi", "uniform", "consistent-even", "drrs", "by-key",
	"optimized", "remote-pebble", "scaleup", "scaledown", "rebalance", "task-migration",
	// Parallelism fields.
	"MapperParallelism", "FilterParallelism", "PersonFilterParallelism", "AuctionFilterParallelism", "JoinParallelism",
	"AuctionSourceParallelism", "BidSourceParallelism", "ClosedAuctionParallelism", "StatefulMapperParallelism",
	"SlidingWindowParallelism", "HottestItemParallelism", "TumblingWindowParallelism", "HighestBidParallelism",
	"CustomWindowJoinParallelism", "CpuReadingStatsParallelism", "JobEventStatsParallelism", "CalculateCellIdParallelism",
	"MovingMedianTripTimeParallelism", "Top10RouteParallelism", "RetentionAnalyzerParallelism",
	"ViewerLoyaltyCalculatorParallelism", "LoyaltyTrendAnalyzerParallelism", "SinkParallelism",
	// Operator names (targets and placements).
	"mapper", "filter", "personSource", "auctionSource", "bidSource", "personFilter", "auctionFilter", "join",
	"closedAuction", "statefulMapper", "slidingWindow", "HottestItem", "tumblingWindow", "highestBid", "windowJoin",
	"source", "sink", "cpuReadingStats", "jobEventStats", "calculateCellId", "movingMedianTripTime", "twitchFileSource",
	"retention-Analyzer", "viewer-Loyalty-Calculator", "loyalty-Trend-Analyzer",
	// Suite fields.
	"_comment", "CooldownSeconds", "MaxAttempts", "RetryDelaySeconds", "StopOnFailure", "GitFetch", "RestoreBranch",
	"KeepFailedResults", "Experiments", "Name", "Branch", "ConfigPath", "ResultKeyword", "Skip",
}

// jsonFiles lists the .json files under dirs, and which of them are suites
// (a top-level "Experiments").
func jsonFiles(t *testing.T, dirs ...string) (configs, suites []string) {
	t.Helper()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(p) != ".json" {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(data, &top); err != nil {
				return errors.Join(errors.New(p), err)
			}
			if _, ok := top["Experiments"]; ok {
				suites = append(suites, p)
			} else {
				configs = append(configs, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return configs, suites
}

// namesIn collects every object key and string value of a JSON document.
func namesIn(v any, into map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			into[k] = true
			namesIn(x, into)
		}
	case []any:
		for _, x := range v {
			namesIn(x, into)
		}
	case string:
		into[v] = true
		if op, _, ok := strings.Cut(v, ":"); ok { // "operator: host"
			into[strings.TrimSpace(op)] = true
		}
	}
}

func TestArtifactFormat(t *testing.T) {
	t.Setenv("KOALA_HOME", t.TempDir())
	configs, suites := jsonFiles(t, artifactTestdata)
	if len(configs) < 20 || len(suites) < 2 {
		t.Fatalf("%d configs and %d suites under %s, want at least 20 and 2", len(configs), len(suites), artifactTestdata)
	}
	seen := map[string]bool{}
	for _, p := range append(slices.Clone(configs), suites...) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		namesIn(v, seen)
	}
	for _, n := range artifactNames {
		if !seen[n] {
			t.Errorf("no file under %s uses %q", artifactTestdata, n)
		}
	}
	o := RunOptions{SkipEnvironment: true}
	for _, p := range configs {
		if _, _, err := PrepareConfig(p, o); err != nil {
			t.Errorf("%v", err)
		}
	}
	for _, p := range suites {
		s, err := LoadSuiteFor(p, o)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(s.Input.Entries) == 0 {
			t.Errorf("suite %s: no experiments", p)
		}
	}
}

// TestArtifactCheckout runs TestArtifactFormat's checks on the artifact's
// own files when KOALA_ARTIFACT_DIR names a checkout of it. In a git
// checkout (a clone), suite entries whose configs live on other branches
// are read from those branches (suite_git.go). In a plain copy of the
// files such an entry is reported, not failed: the suite needs that file
// in the tree or a git checkout, and the error says so.
func TestArtifactCheckout(t *testing.T) {
	dir := os.Getenv("KOALA_ARTIFACT_DIR")
	if dir == "" {
		t.Skip("KOALA_ARTIFACT_DIR is not set (a checkout of CASP-Systems-BU/koala)")
	}
	t.Setenv("KOALA_HOME", t.TempDir())
	var dirs []string
	for _, d := range []string{"nexmarkJson", "fileReaderJson", "nsdi27"} {
		dirs = append(dirs, filepath.Join(dir, "scripts", d))
	}
	configs, suites := jsonFiles(t, dirs...)
	o := RunOptions{SkipEnvironment: true}
	accepted := 0
	for _, p := range configs {
		if _, _, err := PrepareConfig(p, o); err != nil {
			t.Errorf("%v", err)
			continue
		}
		accepted++
	}
	suitesOK, blocked := 0, 0
	for _, p := range suites {
		s, err := LoadSuiteFor(p, o)
		if err == nil {
			suitesOK++
			t.Logf("suite %s: %d experiments", p, len(s.Input.Entries))
			continue
		}
		var other []error
		missing := 0
		for _, e := range unjoin(err) {
			if strings.Contains(e.Error(), "does not exist") && strings.Contains(e.Error(), "the artifact keeps it on branch") {
				missing++
				continue
			}
			other = append(other, e)
		}
		if len(other) > 0 {
			t.Errorf("%v", errors.Join(other...))
			continue
		}
		blocked++
		t.Logf("suite %s: %d config(s) are on other branches of the artifact, not in this tree", p, missing)
	}
	t.Logf("accepted %d of %d configs and %d of %d suites (%d more need configs from the artifact's other branches)",
		accepted, len(configs), suitesOK, len(suites), blocked)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}
