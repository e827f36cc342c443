package experiments_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koala/deploy/local"
	"koala/workflows"
)

// TestEndToEndReconfigureOnRequest runs the lazy counter without any
// configured reconfiguration and rescales it while it runs with `koala
// reconfigure` (the workflow's "reconfigure" update). A request the
// validator rejects is sent through the Temporal CLI, as README shows, and
// a job id that does not exist gets a one-line error.
func TestEndToEndReconfigureOnRequest(t *testing.T) {
	cfg := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	missing := runKoala(ctx, t, cfg.Env(), "reconfigure", "--temporal", cfg.TemporalAddr(),
		"--job", "e2e-no-such-job", "--operator", "counter", "--parallelism", "3")
	if missing.exitCode == 0 || strings.TrimSpace(missing.stderr) != "koala: job e2e-no-such-job not found" {
		t.Errorf("reconfigure of a missing job: exit %d, stderr %q; want non-zero and \"koala: job e2e-no-such-job not found\"", missing.exitCode, missing.stderr)
	}

	m := readJSONObject(t, filepath.Join("testdata", "e2e", "lazy_counter.json"))
	m["TotalRuntimeSeconds"] = 30
	m["Reconfigurations"] = []any{}
	m["KafkaBrokers"] = cfg.KafkaBrokers()
	path := writeJSONObject(t, filepath.Join(t.TempDir(), "on_request.json"), m)
	id := fmt.Sprintf("e2e-on-request-%d", time.Now().UnixNano())
	started := runKoala(ctx, t, cfg.Env(), "run", path, "--detach", "--temporal", cfg.TemporalAddr(),
		"--kafka", strings.Join(cfg.KafkaBrokers(), ","), "--results", t.TempDir(), "--id", id)
	if started.exitCode != 0 {
		t.Fatalf("koala run --detach exited %d\nstderr:\n%s%s", started.exitCode, started.stderr, stackLogTails(cfg))
	}

	// Rejected by the validator, through the Temporal CLI. The job may
	// still be deploying, which is rejected too: retry until the reason is
	// the operator.
	var rejected string
	err := poll(ctx, time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		out, _ := exec.CommandContext(ctx, cfg.TemporalBinary(), "workflow", "update", "execute",
			"--address", cfg.TemporalAddr(), "--namespace", "default", "--workflow-id", id, "--name", workflows.UpdateReconfigure,
			"--input", `{"type":"scaleup","target_operator":"nope","target_parallelism":3}`).CombinedOutput()
		rejected = string(out)
		if strings.Contains(rejected, `operator \"nope\" not found`) || strings.Contains(rejected, `operator "nope" not found`) {
			return nil
		}
		return fmt.Errorf("temporal workflow update execute: %s", rejected)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("temporal workflow update execute (unknown operator): %s", strings.TrimSpace(rejected))

	var res cliResult
	err = poll(ctx, time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		res = runKoala(ctx, t, cfg.Env(), "reconfigure", "--temporal", cfg.TemporalAddr(),
			"--job", id, "--operator", "counter", "--parallelism", "3")
		if res.exitCode != 0 {
			if strings.Contains(res.stderr, "not running yet") {
				return fmt.Errorf("%s", res.stderr)
			}
			return nil // a real failure, reported below
		}
		return nil
	})
	if err != nil || res.exitCode != 0 {
		t.Fatalf("koala reconfigure: exit %d (%v)\nstdout:\n%s\nstderr:\n%s%s", res.exitCode, err, res.stdout, res.stderr, stackLogTails(cfg))
	}
	t.Logf("koala reconfigure:\n%s", res.stdout)
	child := workflows.JobIDFor(id) + "-reconfig-1"
	for _, want := range []string{"reconfiguration " + child + " done", "swap-routes", "operator counter now has parallelism 3"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("koala reconfigure output lacks %q", want)
		}
	}

	out := exactResult(ctx, t, cfg, id)
	if len(out.Reconfigs) != 1 || out.Reconfigs[0].WorkflowID != child {
		t.Errorf("reconfigurations in the result: %+v, want the one requested (%s)", out.Reconfigs, child)
	}
	if got := len(out.Final.TasksOf("counter")); got != 3 {
		t.Errorf("%d counter tasks at the end, want 3", got)
	}
}

// exactResult waits for experiment workflow id's result and checks that
// it produced input and lost and duplicated none of it.
func exactResult(ctx context.Context, t *testing.T, cfg local.Config, id string) workflows.ExperimentResult {
	t.Helper()
	tc := temporalClient(ctx, t, cfg)
	var out workflows.ExperimentResult
	if err := tc.GetWorkflow(ctx, id, "").Get(ctx, &out); err != nil {
		t.Fatalf("result of workflow %s: %v%s", id, err, stackLogTails(cfg))
	}
	if out.Lost != 0 || out.Duplicated != 0 || out.Produced == 0 {
		t.Errorf("produced %d, lost %d, duplicated %d: want > 0, 0, 0", out.Produced, out.Lost, out.Duplicated)
	}
	return out
}
