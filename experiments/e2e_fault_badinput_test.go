package experiments_test

// Bad input at the config level: `koala run` rejects each broken config
// at once, names the field and value and says what is allowed, and never
// contacts Temporal. TestRunRejectsBadConfig (e2e_test.go) covers unknown
// fields, a missing QueryName and a zero target parallelism; the parser's
// own table (config_test.go) covers every message in detail. This matrix
// covers each kind of problem once more through the real binary, plus what
// only the binary checks: query and operator names.

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// badInputWithin is how fast `koala run` must reject a config.
const badInputWithin = 10 * time.Second

func TestFaultBadConfigMatrix(t *testing.T) {
	koalaBinary(t) // built before the clock of the first case starts
	fakeTemporal, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fakeTemporal.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	reconfig := func(fields map[string]any) []any {
		r := map[string]any{"TriggerTimeSeconds": 8, "Type": "scaleup", "TargetOperator": "counter", "TargetParrallelism": 4}
		for k, v := range fields {
			r[k] = v
		}
		return []any{r}
	}
	cases := []struct {
		name   string
		change map[string]any
		want   []string
	}{
		// Wrong JSON types.
		{"runtime as string", map[string]any{"TotalRuntimeSeconds": "24"},
			[]string{`field "TotalRuntimeSeconds"`, "expected a number", "got string"}},
		{"keys as bool", map[string]any{"NumKeys": true},
			[]string{`field "NumKeys"`, "expected a number", "got boolean"}},
		{"fraction", map[string]any{"NumPartitions": 2.5},
			[]string{`field "NumPartitions"`, "expected a whole number, got 2.5"}},
		{"query as number", map[string]any{"QueryName": 7},
			[]string{`field "QueryName"`, "expected a string, got number"}},
		{"reconfigurations as object", map[string]any{"Reconfigurations": map[string]any{}},
			[]string{`field "Reconfigurations"`, "expected an array of objects, got object"}},
		// Out of range.
		{"buckets above max", map[string]any{"NumBuckets": 70000},
			[]string{`field "NumBuckets"`, "70000 is out of range (must be between 1 and 65536)"}},
		{"negative rate", map[string]any{"RatePerSecond": -5},
			[]string{`field "RatePerSecond"`, "-5 is out of range (must be at least 1)"}},
		{"skew", map[string]any{"Skew": 11},
			[]string{`field "Skew"`, "expected a number between 0 and 10", "got 11"}},
		{"trigger after the end", map[string]any{"Reconfigurations": reconfig(map[string]any{"TriggerTimeSeconds": 24})},
			[]string{`field "TriggerTimeSeconds" in Reconfigurations[0]`, "24 is out of range (must be less than TotalRuntimeSeconds (24))"}},
		// Parallelism.
		{"parallelism 0", map[string]any{"CounterParallelism": 0},
			[]string{`field "CounterParallelism"`, "0 is out of range (must be at least 1)"}},
		{"parallelism above NumBuckets", map[string]any{"NumBuckets": 8, "CounterParallelism": 9},
			[]string{`field "CounterParallelism"`, "9 is out of range (must be between 1 and NumBuckets (8))"}},
		{"target parallelism above NumBuckets", map[string]any{"NumBuckets": 8, "Reconfigurations": reconfig(map[string]any{"TargetParrallelism": 9})},
			[]string{`field "TargetParrallelism" in Reconfigurations[0]`, "9 is out of range (must be between 1 and NumBuckets (8))"}},
		// Enumerations.
		{"unknown protocol", map[string]any{"ReconfigProtocol": "koala"},
			[]string{`field "ReconfigProtocol"`, `unknown value "koala"`, "allowed: lazy, stop-and-restart, drrs"}},
		{"unknown backend", map[string]any{"StateBackendType": "tikv"},
			[]string{`field "StateBackendType"`, `unknown value "tikv"`, "allowed: pebble, remote-pebble, memory"}},
		{"unknown reconfiguration type", map[string]any{"Reconfigurations": reconfig(map[string]any{"Type": "grow"})},
			[]string{`field "Type" in Reconfigurations[0]`, `unknown type "grow"`, "allowed: ", "scaleup"}},
		// Names only the binary can check: queries and their operators.
		{"unknown query", map[string]any{"QueryName": "nope"},
			[]string{`QueryName "nope" is unknown`, "known: ", "counter", "hello"}},
		{"unknown operator in a parallelism field", map[string]any{"FooParallelism": 2},
			[]string{`field "FooParallelism"`, `query "counter" has no operator "foo"`, "operators: source, counter, sink"}},
		{"unknown target operator", map[string]any{"Reconfigurations": reconfig(map[string]any{"TargetOperator": "bar"})},
			[]string{`field "TargetOperator" in Reconfigurations[0]`, `query "counter" has no operator "bar"`, "operators: source, counter, sink"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := readJSONObject(t, filepath.Join("testdata", "e2e", "fault_lazy_counter.json"))
			for k, v := range tc.change {
				m[k] = v
			}
			path := writeJSONObject(t, filepath.Join(t.TempDir(), "bad.json"), m)
			cctx, ccancel := context.WithTimeout(ctx, time.Minute) // kills a hanging command
			defer ccancel()
			res := runKoala(cctx, t, nil, "run", path,
				"--temporal", fakeTemporal.Addr().String(), "--kafka", "127.0.0.1:1",
				"--results", t.TempDir(), "--id", "e2e-bad-input")
			stderr := strings.TrimSpace(res.stderr)
			t.Logf("exit %d in %s: %s", res.exitCode, res.took.Round(time.Millisecond), stderr)
			if res.exitCode == 0 {
				t.Fatalf("exit 0\nstdout:\n%s", res.stdout)
			}
			if res.took > badInputWithin {
				t.Errorf("took %s, want ≤ %s", res.took.Round(time.Millisecond), badInputWithin)
			}
			for _, w := range append([]string{path}, tc.want...) {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q", w)
				}
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
				t.Errorf("koala run panicked")
			}
			if strings.Contains(stderr, "connect to Temporal") || strings.Contains(res.stdout, "started") {
				t.Errorf("koala run got past validation:\nstdout:\n%s", res.stdout)
			}
		})
	}
	// A connection attempt would sit in the listen backlog by now.
	fakeTemporal.(*net.TCPListener).SetDeadline(time.Now().Add(300 * time.Millisecond))
	if conn, err := fakeTemporal.Accept(); err == nil {
		conn.Close()
		t.Errorf("koala run connected to --temporal %s before rejecting a bad config", fakeTemporal.Addr())
	}
}
