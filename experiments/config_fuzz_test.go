package experiments

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/workflows"
	"koala/workflows/plan"
)

// FuzzParseConfig feeds arbitrary bytes to the experiment config parser.
// It must never panic, must be deterministic, must reject with a message
// that names the config, and whatever it accepts must satisfy the ranges
// the workflows rely on.
func FuzzParseConfig(f *testing.F) {
	for _, pattern := range []string{"testdata/e2e/*.json", "testdata/config/*.json", "suites/*/*.json", "*.json"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte(`{"QueryName":"counter","NumBuckets":4,"CounterParallelism":4,"Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"rebalance","TargetOperator":"counter"}],"Generator":"zipf","Skew":1.5,"NumKeys":50}`))
	f.Add([]byte(`{"QueryName":"q","Reconfigurations":[{"TriggerTimeSeconds":3,"Type":"task-migration","TaskID":"m-0","TargetWorker":"w2"}]}`))
	f.Add([]byte(`{"QueryName":"q","NumBuckets":1e400}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseConfig("fuzz.json", data)
		in2, err2 := ParseConfig("fuzz.json", data)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) || !reflect.DeepEqual(in, in2) {
			t.Fatalf("two parses differ: %v / %v", err, err2)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the config: %v", err)
			}
			return
		}
		checkAccepted(t, in)
	})
}

// checkAccepted checks the invariants of an accepted config.
func checkAccepted(t *testing.T, in workflows.ExperimentInput) {
	t.Helper()
	if in.QueryName == "" {
		t.Fatalf("accepted without a QueryName")
	}
	if in.NumBuckets < 1 || in.NumBuckets > MaxNumBuckets {
		t.Fatalf("accepted NumBuckets %d", in.NumBuckets)
	}
	if in.TotalRuntimeSeconds < 1 || in.BatchSize < 1 || in.Partitions < 1 || in.MinWorkers < 1 || in.DrainTimeoutSeconds < 1 {
		t.Fatalf("accepted a non-positive size: %+v", in)
	}
	// A warm-up with no rate runs unlimited (RatePerSec 0, warmUpRate).
	unlimited := in.Producer.RatePerSec == 0 && in.Params[control.ParamIsWarmUp] == "true"
	if (in.Producer.RatePerSec < 1 && !unlimited) || in.Producer.NumKeys < 1 || in.Producer.Producers < 1 || in.Producer.ValueSize < 0 {
		t.Fatalf("accepted producer %+v", in.Producer)
	}
	if in.Producer.Skew < 0 || in.Producer.Skew > 10 {
		t.Fatalf("accepted Skew %v", in.Producer.Skew)
	}
	if !slices.Contains(protocols, in.ReconfigProtocol) || !slices.Contains(stateBackends, in.StateBackend) {
		t.Fatalf("accepted protocol %q, backend %q", in.ReconfigProtocol, in.StateBackend)
	}
	for op, p := range in.Parallelism {
		if p < 1 || p > in.NumBuckets {
			t.Fatalf("accepted parallelism %d of %q with NumBuckets %d", p, op, in.NumBuckets)
		}
	}
	if len(in.Workers) > 0 && in.MinWorkers > len(in.Workers) {
		t.Fatalf("accepted MinWorkers %d with %d Workers", in.MinWorkers, len(in.Workers))
	}
	for i, r := range in.Reconfigurations {
		if r.TriggerTimeSeconds < 0 || r.TriggerTimeSeconds >= in.TotalRuntimeSeconds {
			t.Fatalf("Reconfigurations[%d]: accepted trigger %d with TotalRuntimeSeconds %d", i, r.TriggerTimeSeconds, in.TotalRuntimeSeconds)
		}
		if i > 0 && in.Reconfigurations[i-1].TriggerTimeSeconds > r.TriggerTimeSeconds {
			t.Fatalf("reconfigurations not ordered by trigger time: %+v", in.Reconfigurations)
		}
		switch r.Type {
		case plan.KindScaleUp, plan.KindScaleDown:
			if r.TargetOperator == "" || r.TargetParallelism < 1 || r.TargetParallelism > in.NumBuckets {
				t.Fatalf("Reconfigurations[%d]: accepted %+v with NumBuckets %d", i, r, in.NumBuckets)
			}
		case plan.KindRebalance:
			if r.TargetOperator == "" || (len(r.BucketLoad) != 0 && len(r.BucketLoad) != in.NumBuckets) {
				t.Fatalf("Reconfigurations[%d]: accepted rebalance %+v with NumBuckets %d", i, r, in.NumBuckets)
			}
			for _, l := range r.BucketLoad {
				if l < 0 {
					t.Fatalf("Reconfigurations[%d]: accepted a negative load %v", i, l)
				}
			}
		case plan.KindTaskMigration:
			if r.TaskID == "" || r.TargetWorker == "" {
				t.Fatalf("Reconfigurations[%d]: accepted task migration %+v", i, r)
			}
		default:
			t.Fatalf("Reconfigurations[%d]: accepted type %q", i, r.Type)
		}
	}
}
