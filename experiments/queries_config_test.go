package experiments

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/queries"
	_ "koala/queries/examples" // the example queries
	_ "koala/queries/nexmark"  // the Nexmark queries and generator
	_ "koala/queries/traces"   // the trace queries and generators
)

// TestTraceQueryConfigs: the example configs of the trace queries parse,
// name registered queries, operators and generators, and rescale a
// stateful operator.
func TestTraceQueryConfigs(t *testing.T) {
	for _, q := range []string{"azure", "borg", "taxi", "twitch"} {
		t.Run(q, func(t *testing.T) {
			in, err := LoadConfig(filepath.Join("queries", q+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if in.QueryName != q || in.Producer.Generator != q {
				t.Fatalf("QueryName %q, Generator %q; want %q for both", in.QueryName, in.Producer.Generator, q)
			}
			ops, err := queries.Operators(in.QueryName, in.Parallelism)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := produce.NewGenerator(control.ProduceRequest{Generator: in.Producer.Generator, NumKeys: in.Producer.NumKeys, Seed: in.Producer.Seed, Skew: in.Producer.Skew}); err != nil {
				t.Fatal(err)
			}
			if len(in.Reconfigurations) != 1 {
				t.Fatalf("%d reconfigurations, want 1", len(in.Reconfigurations))
			}
			target := in.Reconfigurations[0].TargetOperator
			i := slices.IndexFunc(ops, func(op control.OperatorSpec) bool { return op.Name == target })
			if i < 0 || !ops[i].Stateful {
				t.Fatalf("reconfiguration targets %q, which is no stateful operator of %s", target, q)
			}
			if ops[i].Parallelism != 2 {
				t.Fatalf("%s starts with %d tasks, want 2", target, ops[i].Parallelism)
			}
		})
	}
}

// TestFilePathKnob: "FilePath" lists the trace files a trace generator
// replays; it must be a list of non-empty strings.
func TestFilePathKnob(t *testing.T) {
	in, err := ParseConfig("f.json", []byte(`{"QueryName": "azure", "Generator": "azure", "FilePath": ["a/azure0.csv", "a/azure1.csv"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := in.Params["FilePath"]; got != "a/azure0.csv,a/azure1.csv" {
		t.Fatalf("Params[FilePath] = %q", got)
	}
	_, err = ParseConfig("f.json", []byte(`{"QueryName": "azure", "FilePath": "a/azure0.csv"}`))
	if err == nil || !strings.Contains(err.Error(), `"FilePath"`) {
		t.Fatalf("a string FilePath: %v, want an error naming the field", err)
	}
}

// TestEveryQueryConfig: every config under experiments/queries parses,
// passes the check `koala run` makes before starting (registered query,
// known operators), scales up an operator of its query, and together they
// cover every registered query family.
func TestEveryQueryConfig(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("queries", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no configs under experiments/queries: %v", err)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		in, err := LoadConfig(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if err := CheckQuery(in); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		seen[in.QueryName] = true
		if len(in.Reconfigurations) == 0 {
			t.Errorf("%s: no reconfiguration", p)
		}
	}
	for _, want := range []string{
		"azure", "borg", "taxi", "twitch",
		"nexmark-q1", "nexmark-q2", "nexmark-q3", "nexmark-q4", "nexmark-q5", "nexmark-q6", "nexmark-q7", "nexmark-q8",
		"example-counter", "example-filter", "example-mapper", "example-tumbling-window",
	} {
		if !seen[want] {
			t.Errorf("no config under experiments/queries runs %s", want)
		}
	}
}
