package experiments_test

import (
	"path/filepath"
	"testing"
	"time"

	"koala/experiments"
	"koala/workflows"
)

// TestEndToEndTraceQueries runs each trace query's example config,
// shortened, through `koala run` on the real stack: synthetic trace input,
// a lazy scale-out of its stateful operator, no record lost or duplicated.
func TestEndToEndTraceQueries(t *testing.T) {
	for _, q := range []string{"azure", "borg", "taxi", "twitch"} {
		t.Run(q, func(t *testing.T) {
			cfg := sharedStack(t)
			begin := time.Now()
			src := filepath.Join("queries", q+".json")
			in, err := experiments.LoadConfig(src)
			if err != nil {
				t.Fatal(err)
			}
			if in.ReconfigProtocol != workflows.ProtocolLazy || len(in.Reconfigurations) != 1 {
				t.Fatalf("%s is not one lazy reconfiguration: %+v", src, in)
			}
			m := readJSONObject(t, src)
			m["TotalRuntimeSeconds"] = 24
			m["RatePerSecond"] = 1000
			m["Reconfigurations"].([]any)[0].(map[string]any)["TriggerTimeSeconds"] = 8
			m["KafkaBrokers"] = cfg.KafkaBrokers()
			path := writeJSONObject(t, filepath.Join(t.TempDir(), q+".json"), m)
			runAndCheck(t, cfg, path, "e2e-"+q, lazyActivities, lazySteps)
			t.Logf("%s took %s", q, time.Since(begin).Round(time.Millisecond))
		})
	}
}
