package experiments_test

// Shared machinery of the end-to-end tests: the koala binary (built once per
// test binary), one local stack on free ports shared by the tests that need
// it (started on first use, stopped by TestMain or by TestStackDownLeavesNothing),
// and helpers to run the CLI, poll, read Temporal histories and query
// ClickHouse.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"

	"koala/dataplane/metrics"
	"koala/deploy/local"
)

// Ports of the default stack that may be running on this machine; the
// tests never use them.
var defaultPorts = map[int]bool{
	local.DefaultTemporalPort: true, local.DefaultTemporalUIPort: true, local.DefaultNATSPort: true,
	local.DefaultKafkaPort: true, local.DefaultKafkaControllerPort: true,
	local.DefaultClickHouseHTTPPort: true, local.DefaultClickHouseTCPPort: true,
}

func TestMain(m *testing.M) {
	flag.Parse()
	// A test binary that times out or is interrupted dies without running
	// deferred code, and the stack's processes run in their own sessions, so
	// they would outlive it. Stop the shared stack shortly before the
	// -timeout panic and on SIGINT/SIGTERM.
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > 0 {
			margin := min(2*time.Minute, d/10)
			time.AfterFunc(d-margin, func() {
				fmt.Fprintf(os.Stderr, "e2e: the test binary times out in %s: stopping the shared stack now\n", margin)
				stopSharedStack()
			})
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping the shared stack\n", s)
		stopSharedStack()
		os.Exit(1)
	}()

	code := m.Run()
	if err := stopSharedStack(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stopping the shared stack: %v\n", err)
		code = 1
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// ---------------------------------------------------------------- binary

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// koalaBinary builds koala/cmd/koala once per test binary into a temporary
// directory (removed by TestMain) and returns its path.
func koalaBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "koala-e2e-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "koala")
		start := time.Now()
		cmd := exec.Command("go", "build", "-o", binPath, "koala/cmd/koala")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build koala/cmd/koala: %v\n%s", err, out)
			return
		}
		t.Logf("built %s in %s", binPath, time.Since(start).Round(time.Millisecond))
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// repoRoot is the directory holding go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// koalaHome is the shared install cache: $KOALA_HOME or <repo>/.koala.
func koalaHome(t *testing.T) string {
	if h := os.Getenv("KOALA_HOME"); h != "" {
		return h
	}
	return filepath.Join(repoRoot(t), ".koala")
}

// ---------------------------------------------------------------- stack

// shared is the one stack of this test binary.
var shared struct {
	mu     sync.Mutex
	cfg    *local.Config // nil when no stack is up
	runDir string        // removed when the stack is stopped
	err    error         // a failed Up; later tests fail fast instead of retrying
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// sharedStack returns the running shared stack (real Kafka, controller, three
// workers, every port free and none of the default ones), starting it on
// first use. TestMain stops it.
func sharedStack(t *testing.T) local.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real Temporal, NATS, Kafka and ClickHouse processes plus koala controller and workers")
	}
	bin := koalaBinary(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.err != nil {
		t.Fatalf("the shared stack failed to start earlier: %v", shared.err)
	}
	if shared.cfg != nil {
		for _, s := range local.Status(*shared.cfg) {
			if !s.Running {
				t.Fatalf("shared stack: %s is not running any more (pid %d, log %s)", s.Name, s.PID, s.Log)
			}
		}
		return *shared.cfg
	}
	runDir, err := os.MkdirTemp("", "koala-e2e-run-")
	if err != nil {
		t.Fatal(err)
	}
	var cfg local.Config
	for attempt := 0; ; attempt++ {
		cfg, err = local.FreePortConfig(koalaHome(t), runDir)
		if err != nil {
			t.Fatal(err)
		}
		if !usesDefaultPort(cfg) {
			break
		}
		if attempt == 10 {
			t.Fatalf("FreePortConfig keeps returning a default port: %+v", cfg)
		}
	}
	cfg.Kafka = local.KafkaReal
	cfg.Controller = true
	cfg.Workers = 3
	cfg.KoalaBinary = bin
	// Recorded before Up so that a partial start is stopped too.
	shared.cfg, shared.runDir = &cfg, runDir

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	up := cfg
	up.Progress = logWriter{t}
	start := time.Now()
	if err := local.Up(ctx, up); err != nil {
		shared.err = err
		if derr := stopSharedStackLocked(); derr != nil {
			t.Errorf("Down after failed Up: %v", derr)
		}
		t.Fatalf("Up: %v", err)
	}
	t.Logf("shared stack up in %s: temporal %s, nats %s, kafka %v, clickhouse %s, run dir %s",
		time.Since(start).Round(time.Millisecond), cfg.TemporalAddr(), cfg.NATSURL(), cfg.KafkaBrokers(), cfg.ClickHouseURL(), runDir)
	for _, s := range local.Status(cfg) {
		if !s.Running || s.PID == 0 {
			t.Fatalf("after Up, %s is not running: %+v", s.Name, s)
		}
	}
	return cfg
}

func usesDefaultPort(c local.Config) bool {
	for _, p := range []int{c.TemporalPort, c.TemporalUIPort, c.NATSPort, c.KafkaPort, c.KafkaControllerPort, c.ClickHouseHTTPPort, c.ClickHouseTCPPort} {
		if defaultPorts[p] {
			return true
		}
	}
	return false
}

// takeSharedStack hands the shared stack over to the caller, who must stop
// it (the next sharedStack call starts a new one). It returns the run dir
// too, which the caller removes.
func takeSharedStack(t *testing.T) (local.Config, string) {
	cfg := sharedStack(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	runDir := shared.runDir
	shared.cfg, shared.runDir = nil, ""
	return cfg, runDir
}

func stopSharedStack() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return stopSharedStackLocked()
}

func stopSharedStackLocked() error {
	if shared.cfg == nil {
		return nil
	}
	err := local.Down(*shared.cfg)
	if err == nil {
		for _, s := range local.Status(*shared.cfg) {
			if s.Running {
				err = errors.Join(err, fmt.Errorf("%s (pid %d) still running after Down", s.Name, s.PID))
			}
		}
	}
	if err == nil {
		os.RemoveAll(shared.runDir)
	}
	shared.cfg, shared.runDir = nil, ""
	return err
}

// ---------------------------------------------------------------- helpers

// poll calls cond until it returns nil or the deadline passes; it returns
// the last error.
func poll(ctx context.Context, timeout, every time.Duration, cond func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		err := cond(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

// cliResult is one finished `koala` invocation.
type cliResult struct {
	stdout, stderr string
	exitCode       int
	took           time.Duration
}

// runKoala runs the koala binary with args and an environment without any
// KOALA_* variable (so nothing defaults to the default stack), plus env.
func runKoala(ctx context.Context, t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(ctx, koalaBinary(t), args...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Dir = t.TempDir()
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.exitCode = ee.ExitCode()
	default:
		t.Fatalf("koala %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, res.stdout, res.stderr)
	}
	return res
}

func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KOALA_") {
			out = append(out, kv)
		}
	}
	return out
}

// temporalClient dials the stack's Temporal frontend; the client is closed
// when the test ends.
func temporalClient(ctx context.Context, t *testing.T, cfg local.Config) client.Client {
	t.Helper()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	c, err := client.DialContext(dctx, client.Options{HostPort: cfg.TemporalAddr(), Namespace: "default", Logger: logger})
	if err != nil {
		t.Fatalf("dial Temporal at %s: %v", cfg.TemporalAddr(), err)
	}
	t.Cleanup(c.Close)
	return c
}

// activityStep is one activity of a workflow history.
type activityStep struct {
	ScheduledID int64
	Type        string
	Summary     string // user metadata summary, "" when the server did not keep one
	Completed   bool
}

// workflowActivities reads the whole history of workflow id (latest run)
// and returns its activities in scheduling order and the type of its last
// event.
func workflowActivities(ctx context.Context, t *testing.T, c client.Client, id string) ([]activityStep, enumspb.EventType) {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var steps []activityStep
	index := map[int64]int{}
	var last enumspb.EventType
	dc := converter.GetDefaultDataConverter()
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		last = ev.GetEventType()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			st := activityStep{ScheduledID: ev.GetEventId(), Type: ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()}
			if p := ev.GetUserMetadata().GetSummary(); p != nil {
				if err := dc.FromPayload(p, &st.Summary); err != nil {
					t.Errorf("history of %s: event %d: decode summary: %v", id, ev.GetEventId(), err)
				}
			}
			index[st.ScheduledID] = len(steps)
			steps = append(steps, st)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if i, ok := index[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; ok {
				steps[i].Completed = true
			}
		}
	}
	return steps, last
}

// stackMetrics reads the stack's metrics tables (database koala) with the
// client the CLI uses; the test closes it.
func stackMetrics(t *testing.T, cfg local.Config) *metrics.ClickHouse {
	ch := metrics.NewClickHouse(cfg.ClickHouseURL(), cfg.ClickHouseNativeAddr(), "koala")
	t.Cleanup(func() { _ = ch.Close(context.Background()) })
	return ch
}

// checkpointRows counts the job's checkpoint_events rows that match.
func checkpointRows(ctx context.Context, ch *metrics.ClickHouse, job string, match func(metrics.CheckpointRow) bool) (int, error) {
	rows, err := ch.CheckpointRows(ctx, job)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rows {
		if match(r) {
			n++
		}
	}
	return n, nil
}
