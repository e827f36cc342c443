package experiments_test

// Fault test: services that cannot be reached at all give clear, fast
// errors.

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestFaultUnreachableServices points the CLI at closed ports: each command
// exits non-zero within 15 s and names the service and the address.
func TestFaultUnreachableServices(t *testing.T) {
	cfg := sharedStack(t) // a reachable Temporal for the controller's NATS case
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	closed := closedPort(t)
	path := faultConfig(t, cfg, "fault_lazy_counter.json", nil)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"run/temporal", []string{"run", path, "--temporal", closed, "--results", t.TempDir(), "--id", "e2e-fault-unreachable"},
			[]string{"Temporal", closed}},
		{"controller/temporal", []string{"controller", "--temporal", closed, "--nats", cfg.NATSURL(), "--clickhouse", "none"},
			[]string{"Temporal", closed}},
		{"controller/nats", []string{"controller", "--temporal", cfg.TemporalAddr(), "--nats", "nats://" + closed, "--clickhouse", "none"},
			[]string{"NATS", "nats://" + closed}},
		{"worker/nats", []string{"worker", "--id", "e2e-unreachable", "--nats", "nats://" + closed, "--clickhouse", "none", "--data-dir", t.TempDir()},
			[]string{"NATS", "nats://" + closed}},
		{"controller/clickhouse", []string{"controller", "--temporal", cfg.TemporalAddr(), "--nats", cfg.NATSURL(), "--clickhouse", "http://" + closed},
			[]string{"ClickHouse", "http://" + closed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second) // kills a hanging command
			defer ccancel()
			res := runKoala(cctx, t, nil, tc.args...)
			t.Logf("koala %s: exit %d in %s\nstderr: %s", tc.args[0], res.exitCode, res.took.Round(time.Millisecond), strings.TrimSpace(res.stderr))
			if res.exitCode == 0 {
				t.Errorf("exit 0, want non-zero\nstdout:\n%s", res.stdout)
			}
			if res.took > 15*time.Second {
				t.Errorf("took %s, want ≤ 15 s", res.took.Round(time.Millisecond))
			}
			for _, w := range tc.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr lacks %q", w)
				}
			}
		})
	}
}
