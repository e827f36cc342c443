package experiments_test

// End-to-end tests: real Temporal, NATS, Kafka and ClickHouse processes plus
// the koala controller and three workers on free ports (see
// e2e_stack_test.go), experiments started through the `koala run` CLI, and
// their outcome checked in the CLI output, the Temporal histories, the
// Temporal CLI and ClickHouse.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"koala/deploy/local"
	"koala/experiments"
	"koala/queries"
	"koala/workflows"
	"koala/workflows/plan"
)

// TestRunRejectsBadConfig checks that `koala run` validates the config
// before it contacts anything: it points --temporal at a listener of the
// test and asserts that nobody connected to it.
func TestRunRejectsBadConfig(t *testing.T) {
	fakeTemporal, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fakeTemporal.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cases := []struct {
		name, file string
		want       []string
	}{
		{"unknown field", "bad_unknown_field.json", []string{`unknown field "TotalRuntimeSecond"`, `did you mean "TotalRuntimeSeconds"`}},
		{"no QueryName", "bad_missing_query.json", []string{`missing required field "QueryName"`}},
		{"TargetParrallelism 0", "bad_target_zero.json", []string{`"TargetParrallelism" in Reconfigurations[0]`, "out of range"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path, err := filepath.Abs(filepath.Join("testdata", "e2e", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			res := runKoala(ctx, t, nil, "run", path,
				"--temporal", fakeTemporal.Addr().String(), "--kafka", "127.0.0.1:1",
				"--results", t.TempDir(), "--id", "e2e-bad-config")
			t.Logf("koala run %s: exit %d in %s\nstderr: %s", tc.file, res.exitCode, res.took.Round(time.Millisecond), strings.TrimSpace(res.stderr))
			if res.exitCode == 0 {
				t.Fatalf("koala run %s exited 0\nstdout:\n%s", tc.file, res.stdout)
			}
			for _, w := range append([]string{tc.file}, tc.want...) {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr lacks %q", w)
				}
			}
			if strings.Contains(res.stderr, "connect to Temporal") || strings.Contains(res.stdout, "started") {
				t.Errorf("koala run got past validation:\nstdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
			}
		})
	}
	// A connection attempt would sit in the listen backlog by now.
	fakeTemporal.(*net.TCPListener).SetDeadline(time.Now().Add(300 * time.Millisecond))
	if conn, err := fakeTemporal.Accept(); err == nil {
		conn.Close()
		t.Errorf("koala run connected to --temporal %s before rejecting an invalid config", fakeTemporal.Addr())
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Errorf("accept on the fake Temporal listener: %v", err)
	}
}

// Activity types and step names of the reconfiguration child workflows, as
// workflows/reconfigure_*.go schedule them for the scale-outs below.
var (
	// hello: mapper 1→2, stateless, so no state moves.
	stopAndRestartActivities = []string{"PlanScale", "PauseAndDrain", "DeployTasks", "StartTasks", "UpdateRouting", "ResumeSources"}
	stopAndRestartSteps      = []string{"plan", "pause-and-drain", "deploy-tasks", "start-tasks", "update-routing", "resume"}
	// counter: 2→4, only the new tasks gain buckets (no prepare-owners),
	// default migration mode (await-migration runs), nothing removed.
	lazyActivities = []string{"PlanScale", "DeployTasks", "StartTasks", "Handoff", "SwapRoutes", "AwaitMigration"}
	lazySteps      = []string{"plan", "deploy-tasks", "start-tasks", "fast-forward", "swap-routes", "await-migration"}
)

func TestEndToEndHelloWorld(t *testing.T) {
	cfg := sharedStack(t)
	begin := time.Now()

	base, err := experiments.LoadConfig("hello.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(base.Reconfigurations) != 1 {
		t.Fatalf("hello.json has %d reconfigurations, the test expects 1", len(base.Reconfigurations))
	}
	if r := base.Reconfigurations[0]; r.Type != plan.KindScaleUp || r.TargetOperator != "mapper" || r.TargetParallelism != 2 ||
		base.Parallelism["mapper"] != 1 || base.ReconfigProtocol != workflows.ProtocolStopAndRestart {
		t.Fatalf("hello.json is not the mapper 1→2 stop-and-restart scale-out the test expects: %+v", base)
	}

	// The shortened hello world, in the artifact format the CLI reads.
	m := readJSONObject(t, "hello.json")
	m["TotalRuntimeSeconds"] = 24
	m["Reconfigurations"].([]any)[0].(map[string]any)["TriggerTimeSeconds"] = 8
	m["KafkaBrokers"] = cfg.KafkaBrokers()
	path := writeJSONObject(t, filepath.Join(t.TempDir(), "hello.json"), m)

	want := base
	want.TotalRuntimeSeconds = 24
	want.Reconfigurations = slices.Clone(base.Reconfigurations)
	want.Reconfigurations[0].TriggerTimeSeconds = 8
	want.KafkaBrokers = cfg.KafkaBrokers()
	if got, err := experiments.LoadConfig(path); err != nil {
		t.Fatal(err)
	} else if !reflect.DeepEqual(got, want) {
		t.Fatalf("modified config parses as\n%+v\nwant\n%+v", got, want)
	}

	runAndCheck(t, cfg, path, "e2e-hello", stopAndRestartActivities, stopAndRestartSteps)
	t.Logf("TestEndToEndHelloWorld took %s", time.Since(begin).Round(time.Millisecond))
}

func TestEndToEndLazyCounter(t *testing.T) {
	cfg := sharedStack(t)
	begin := time.Now()

	src := filepath.Join("testdata", "e2e", "lazy_counter.json")
	in, err := experiments.LoadConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	wantReconfig := []workflows.ReconfigSpec{{TriggerTimeSeconds: 8, Type: plan.KindScaleUp, TargetOperator: "counter", TargetParallelism: 4}}
	if in.QueryName != "counter" || in.ReconfigProtocol != workflows.ProtocolLazy || in.StateBackend != "pebble" ||
		in.Parallelism["counter"] != 2 || in.TotalRuntimeSeconds != 24 || in.Producer.RatePerSec != 3000 ||
		in.Producer.NumKeys != 2000 || !reflect.DeepEqual(in.Reconfigurations, wantReconfig) {
		t.Fatalf("%s parses as %+v", src, in)
	}
	m := readJSONObject(t, src)
	m["KafkaBrokers"] = cfg.KafkaBrokers()
	path := writeJSONObject(t, filepath.Join(t.TempDir(), "lazy_counter.json"), m)

	runAndCheck(t, cfg, path, "e2e-lazy", lazyActivities, lazySteps)
	t.Logf("TestEndToEndLazyCounter took %s", time.Since(begin).Round(time.Millisecond))
}

// runAndCheck runs the experiment config at path through `koala run` on the
// stack and checks its outcome everywhere it is recorded: the CLI summary and
// plot, the workflow result, the reconfiguration's child workflow history,
// the Temporal CLI's workflow list and ClickHouse.
func runAndCheck(t *testing.T, cfg local.Config, path, idPrefix string, wantActivities, wantSteps []string) workflows.ExperimentResult {
	ch := stackMetrics(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	id := fmt.Sprintf("%s-%d", idPrefix, time.Now().UnixNano())
	jobID := workflows.JobIDFor(id)
	childID := jobID + "-reconfig-1"
	results := t.TempDir()

	// 1. The CLI.
	res := runKoala(ctx, t, cfg.Env(), "run", path,
		"--temporal", cfg.TemporalAddr(), "--kafka", strings.Join(cfg.KafkaBrokers(), ","),
		"--results", results, "--id", id, "--ui", cfg.TemporalUIURL())
	t.Logf("koala run %s: exit %d in %s\n%s", id, res.exitCode, res.took.Round(time.Millisecond), res.stdout)
	if res.exitCode != 0 {
		t.Fatalf("koala run exited %d\nstderr:\n%s%s", res.exitCode, res.stderr, stackLogTails(cfg))
	}
	// Queries whose output keeps no per-key order say why instead of a count.
	wantExact := "lost=0 duplicated=0 reordered=0\n"
	if in, err := experiments.LoadConfig(path); err != nil {
		t.Fatal(err)
	} else if why := queries.Unordered(in.QueryName); why != "" {
		wantExact = "lost=0 duplicated=0 reordered=n/a (order not checked: " + why + ")\n"
	}
	if !strings.Contains(res.stdout, wantExact) {
		t.Errorf("stdout lacks %q", wantExact)
	}
	plot := summaryField(res.stdout, "plot")
	if want := filepath.Join(results, id, "throughput.png"); plot != want {
		t.Errorf("plot line = %q, want %q", plot, want)
	}
	if plot != "" {
		checkPNG(t, plot)
	}

	// 2. The workflow result.
	tc := temporalClient(ctx, t, cfg)
	var out workflows.ExperimentResult
	if err := tc.GetWorkflow(ctx, id, "").Get(ctx, &out); err != nil {
		t.Fatalf("result of workflow %s: %v", id, err)
	}
	t.Logf("result: job %s produced %d (failed %d), sink received %d distinct %d duplicates %d, lost %d duplicated %d",
		out.JobID, out.Produced, out.ProduceFailed, out.Sink.Received, out.Sink.Distinct, out.Sink.Duplicates, out.Lost, out.Duplicated)
	if out.JobID != jobID {
		t.Errorf("JobID = %q, want %q", out.JobID, jobID)
	}
	if out.Produced <= 0 {
		t.Errorf("Produced = %d, want > 0", out.Produced)
	}
	if out.Lost != 0 || out.Duplicated != 0 {
		t.Errorf("Lost = %d, Duplicated = %d, want 0 and 0", out.Lost, out.Duplicated)
	}
	if int64(out.Sink.Distinct) != out.Produced {
		t.Errorf("Sink.Distinct = %d, Produced = %d: want equal", out.Sink.Distinct, out.Produced)
	}
	if len(out.Reconfigs) != 1 {
		t.Fatalf("%d reconfigurations in the result, want 1: %+v", len(out.Reconfigs), out.Reconfigs)
	}
	rc := out.Reconfigs[0]
	if rc.WorkflowID != childID {
		t.Errorf("reconfiguration workflow id = %q, want %q", rc.WorkflowID, childID)
	}
	var stepNames []string
	for _, s := range rc.Steps {
		stepNames = append(stepNames, s.Step)
	}
	if !slices.Equal(stepNames, wantSteps) {
		t.Errorf("reconfiguration steps = %v, want %v", stepNames, wantSteps)
	}
	t.Logf("reconfiguration %s: %.2f s → %.2f s, steps %+v", rc.ID, rc.StartSec, rc.EndSec, rc.Steps)

	// 3. The child workflow's history.
	acts, last := workflowActivities(ctx, t, tc, childID)
	var types, summaries []string
	for _, a := range acts {
		types = append(types, a.Type)
		summaries = append(summaries, a.Summary)
		if !a.Completed {
			t.Errorf("%s: activity %s (scheduled as event %d) has no ActivityTaskCompleted", childID, a.Type, a.ScheduledID)
		}
	}
	if !slices.Equal(types, wantActivities) {
		t.Errorf("%s scheduled activities %v, want %v", childID, types, wantActivities)
	}
	if last != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
		t.Errorf("%s: last history event is %v, want WorkflowExecutionCompleted", childID, last)
	}
	if slices.ContainsFunc(summaries, func(s string) bool { return s != "" }) {
		t.Logf("%s: activity summaries (user metadata) %q", childID, summaries)
		if !slices.Equal(summaries, wantSteps) {
			t.Errorf("%s: activity summaries %q, want the step names %q", childID, summaries, wantSteps)
		}
	} else {
		t.Logf("%s: the ActivityTaskScheduled events carry no user metadata summary", childID)
	}

	// 4. The Temporal CLI lists both workflows.
	var listing string
	if err := poll(ctx, time.Minute, time.Second, func(ctx context.Context) error {
		b, err := exec.CommandContext(ctx, cfg.TemporalBinary(), "workflow", "list", "--address", cfg.TemporalAddr()).CombinedOutput()
		listing = string(b)
		if err != nil {
			return fmt.Errorf("temporal workflow list: %v\n%s", err, b)
		}
		for _, w := range []string{id, childID} {
			if !strings.Contains(listing, w) {
				return fmt.Errorf("temporal workflow list lacks %s:\n%s", w, listing)
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}

	// 5. ClickHouse: per-task metrics of the job and the reconfiguration's
	// step events, in step order.
	if err := poll(ctx, time.Minute, time.Second, func(ctx context.Context) error {
		n, err := ch.TaskRowCount(ctx, jobID)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no task_metrics rows for job %s", jobID)
		}
		t.Logf("koala.task_metrics: %d rows for job %s", n, jobID)
		return nil
	}); err != nil {
		t.Error(err)
	}
	if err := poll(ctx, time.Minute, time.Second, func(ctx context.Context) error {
		evs, err := ch.ReconfigEvents(ctx, jobID)
		if err != nil {
			return err
		}
		var got []string
		for _, e := range evs {
			if e.ReconfigID == childID && e.Phase == "end" {
				got = append(got, e.Step)
			}
		}
		if !slices.Equal(got, wantSteps) {
			return fmt.Errorf("koala.reconfig_events of %s (phase end, by time): %v, want %v", childID, got, wantSteps)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	return out
}

// summaryField returns the value of the line of a `koala run` summary that
// starts with key.
func summaryField(stdout, key string) string {
	for _, line := range strings.Split(stdout, "\n") {
		if rest, ok := strings.CutPrefix(line, key+" "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("plot: %v", err)
		return
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Errorf("plot %s does not decode as PNG: %v", path, err)
		return
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("plot %s is %dx%d pixels", path, b.Dx(), b.Dy())
	}
}

// stackLogTails renders the last lines of the controller and worker logs,
// for failure messages.
func stackLogTails(cfg local.Config) string {
	var b strings.Builder
	for _, s := range local.Status(cfg) {
		if s.Name != "controller" && !strings.HasPrefix(s.Name, "worker-") {
			continue
		}
		data, err := os.ReadFile(s.Log)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		lines = lines[max(0, len(lines)-25):]
		fmt.Fprintf(&b, "\n--- last lines of %s:\n%s", s.Log, strings.Join(lines, "\n"))
	}
	return b.String()
}

func readJSONObject(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func writeJSONObject(t *testing.T, path string, m map[string]any) string {
	t.Helper()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStackDownLeavesNothing stops the shared stack (starting one if no
// other test did) and checks that no process of it is left: every recorded
// PID and every member of its session is gone, and no process mentions the
// run dir or the test's koala binary in its command line or environment.
func TestStackDownLeavesNothing(t *testing.T) {
	cfg, runDir := takeSharedStack(t)
	t.Cleanup(func() {
		// Idempotent: a no-op when the test got to its own Down.
		if err := local.Down(cfg); err != nil {
			t.Errorf("cleanup Down: %v", err)
		}
		os.RemoveAll(runDir)
	})

	// Everything the stack runs, before Down.
	procs := map[int]string{} // pid → cmdline at the time
	names := map[string]bool{}
	for _, s := range local.Status(cfg) {
		names[s.Name] = true
		if !s.Running || s.PID == 0 {
			t.Errorf("before Down, %s is not running: %+v", s.Name, s)
			continue
		}
		procs[s.PID] = procCmdline(s.PID)
	}
	wantNames := []string{"clickhouse", "nats", "kafka", "temporal", "controller"}
	for _, id := range cfg.WorkerIDs() {
		wantNames = append(wantNames, "worker-"+id)
	}
	for _, n := range wantNames {
		if !names[n] {
			t.Errorf("Status lacks %s", n)
		}
	}
	pidFiles, _ := filepath.Glob(filepath.Join(runDir, "*.pid"))
	if len(pidFiles) != len(wantNames) {
		t.Errorf("%d PID files in %s, want %d: %v", len(pidFiles), runDir, len(wantNames), pidFiles)
	}
	for _, f := range pidFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, ok := procs[pid]; !ok {
			t.Errorf("%s names pid %d, which Status does not report", f, pid)
			procs[pid] = procCmdline(pid)
		}
	}
	leaders := make([]int, 0, len(procs))
	for pid := range procs {
		leaders = append(leaders, pid)
	}
	for _, p := range scanProcs() { // children in the services' sessions
		if slices.Contains(leaders, p.sid) {
			if _, ok := procs[p.pid]; !ok {
				procs[p.pid] = p.cmdline
			}
		}
	}
	markers := []string{runDir, cfg.KoalaBinary}
	if n := len(mentioning(markers)); n < len(wantNames) {
		t.Errorf("before Down only %d processes mention %q; the scan is broken", n, markers)
	}
	t.Logf("before Down: %d processes (%d services)", len(procs), len(wantNames))

	start := time.Now()
	if err := local.Down(cfg); err != nil {
		t.Fatalf("Down: %v", err)
	}
	t.Logf("Down took %s", time.Since(start).Round(time.Millisecond))

	for pid, was := range procs {
		if err := syscall.Kill(pid, 0); err != nil {
			continue // gone
		}
		st, err := readProcStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		if st.state == 'Z' && st.ppid == os.Getpid() {
			continue // our own child, exited and not yet reaped
		}
		if now := procCmdline(pid); now != was {
			continue // the pid was reused by an unrelated process
		}
		t.Errorf("pid %d (%s) survived Down (state %c)", pid, was, st.state)
	}
	if left, _ := filepath.Glob(filepath.Join(runDir, "*.pid")); len(left) > 0 {
		t.Errorf("PID files left after Down: %v", left)
	}
	for _, s := range local.Status(cfg) {
		if s.Running || s.PID != 0 {
			t.Errorf("after Down: %+v", s)
		}
	}
	for _, p := range mentioning(markers) {
		t.Errorf("after Down, pid %d (state %c) still mentions the stack: %s", p.pid, p.state, p.cmdline)
	}
}

type procInfo struct {
	pid, ppid, sid int
	state          byte
	cmdline        string
}

// scanProcs lists every process but this one, with its command line.
func scanProcs() []procInfo {
	ents, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil {
			continue
		}
		st.cmdline = procCmdline(pid)
		out = append(out, st)
	}
	return out
}

// mentioning lists the live processes (zombies of this process excepted)
// whose command line or environment contains one of the markers.
func mentioning(markers []string) []procInfo {
	var out []procInfo
	for _, p := range scanProcs() {
		if p.state == 'Z' && p.ppid == os.Getpid() {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
		for _, m := range markers {
			if strings.Contains(p.cmdline, m) || bytes.Contains(env, []byte(m)) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func procCmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	return strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ")
}

// readProcStat parses /proc/<pid>/stat: state, parent and session.
func readProcStat(pid int) (procInfo, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procInfo{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 {
		return procInfo{}, errors.New("malformed stat")
	}
	ppid, _ := strconv.Atoi(f[1])
	sid, _ := strconv.Atoi(f[3])
	return procInfo{pid: pid, ppid: ppid, sid: sid, state: f[0][0]}, nil
}
