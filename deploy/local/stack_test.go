package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"koala/dataplane/control"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane/metrics"
)

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

// testHome is the shared install cache: $KOALA_HOME or <repo>/.koala, so
// the slow installs (temporal CLI, Kafka libs) happen once.
func testHome(t *testing.T) string {
	if h := os.Getenv("KOALA_HOME"); h != "" {
		return h
	}
	return filepath.Join(repoRoot(t), ".koala")
}

var (
	koalaOnce  sync.Once
	koalaBin   string
	koalaFull  bool
	koalaErr   error
	koalaNotes string
	koalaDir   string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if koalaDir != "" {
		os.RemoveAll(koalaDir)
	}
	os.Exit(code)
}

// buildKoala builds cmd/koala once per test binary. full reports whether
// the whole command built; when another package is mid-edit it falls back
// to a binary with only the subcommands the stack itself needs
// (nats-server, kafka-fake), so the infrastructure can still be tested.
func buildKoala(t *testing.T) (bin string, full bool) {
	t.Helper()
	root := repoRoot(t)
	koalaOnce.Do(func() {
		koalaDir, koalaErr = os.MkdirTemp("", "koala-stack-test-")
		if koalaErr != nil {
			return
		}
		koalaBin = filepath.Join(koalaDir, "koala")
		out, err := exec.Command("go", "build", "-o", koalaBin, "koala/cmd/koala").CombinedOutput()
		if err == nil {
			koalaFull = true
			return
		}
		koalaNotes = fmt.Sprintf("full koala build failed, built the stack subcommands only:\n%s", out)
		keep := map[string]bool{"main.go": true, "addrs.go": true, "embedded.go": true, "stack.go": true}
		files, _ := filepath.Glob(filepath.Join(root, "cmd", "koala", "*.go"))
		replace := map[string]string{}
		for _, f := range files {
			if !keep[filepath.Base(f)] {
				replace[f] = "" // deleted in the overlay
			}
		}
		overlay := filepath.Join(koalaDir, "overlay.json")
		b, _ := json.Marshal(map[string]any{"Replace": replace})
		if koalaErr = os.WriteFile(overlay, b, 0o644); koalaErr != nil {
			return
		}
		out, err = exec.Command("go", "build", "-overlay", overlay, "-o", koalaBin, "koala/cmd/koala").CombinedOutput()
		if err != nil {
			koalaErr = fmt.Errorf("go build koala/cmd/koala (stack subcommands only): %v\n%s", err, out)
		}
	})
	if koalaErr != nil {
		t.Fatal(koalaErr)
	}
	if koalaNotes != "" {
		t.Log(koalaNotes)
	}
	return koalaBin, koalaFull
}

type lineWriter struct{ t *testing.T }

func (w lineWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// upStack starts a stack on free ports under a temp run dir and registers
// its Down as cleanup.
func upStack(t *testing.T, kafkaMode string, controller bool, workers int, opts ...func(*Config)) (Config, []int) {
	t.Helper()
	bin, full := buildKoala(t)
	if (controller || workers > 0) && !full {
		t.Fatal("cmd/koala does not build, so there is no `koala controller` / `koala worker` to start")
	}
	c, err := FreePortConfig(testHome(t), filepath.Join(t.TempDir(), "run"))
	if err != nil {
		t.Fatal(err)
	}
	c.Kafka, c.KoalaBinary, c.Progress = kafkaMode, bin, lineWriter{t}
	c.Controller, c.Workers = controller, workers
	for _, o := range opts {
		o(&c)
	}
	t.Cleanup(func() {
		if err := Down(c); err != nil {
			t.Errorf("cleanup Down: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	if err := Up(ctx, c); err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Logf("Up took %s", time.Since(start).Round(time.Millisecond))
	var pids []int
	for _, s := range Status(c) {
		if !s.Running || s.PID == 0 {
			t.Fatalf("after Up, %s is not running: %+v", s.Name, s)
		}
		pids = append(pids, s.PID)
	}
	return c, pids
}

func TestStackUpDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real Temporal, Kafka, ClickHouse and NATS processes")
	}
	c, pids := upStack(t, KafkaReal, false, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("clickhouse", func(t *testing.T) {
		out, err := ClickHouseQuery(ctx, c.ClickHouseURL(), "SELECT 1")
		if err != nil || strings.TrimSpace(out) != "1" {
			t.Fatalf("SELECT 1 = %q, %v", out, err)
		}
		out, err = ClickHouseQuery(ctx, c.ClickHouseURL(), "SELECT version()")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("clickhouse version %s", strings.TrimSpace(out))
	})
	t.Run("clickhouse native", func(t *testing.T) {
		// The metrics tables are created and read over the native port.
		ch := metrics.NewClickHouse(c.ClickHouseURL(), c.ClickHouseNativeAddr(), fmt.Sprintf("koala_stack_%d", time.Now().UnixNano()))
		defer ch.Close(context.Background())
		if err := ch.EnsureSchema(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := ch.JobStart(ctx, "none"); !errors.Is(err, metrics.ErrNoData) {
			t.Fatalf("JobStart of a job without rows: %v, want ErrNoData", err)
		}
	})
	t.Run("nats", func(t *testing.T) { checkNATS(t, c) })
	t.Run("kafka", func(t *testing.T) { checkKafka(t, c) })
	t.Run("temporal", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", c.TemporalAddr(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		out, err := exec.CommandContext(ctx, c.TemporalBinary(), "workflow", "list", "--address", c.TemporalAddr()).CombinedOutput()
		if err != nil {
			t.Fatalf("temporal workflow list: %v\n%s", err, out)
		}
		if _, err := httpGet(ctx, c.TemporalUIURL()); err != nil {
			t.Fatalf("web UI: %v", err)
		}
	})
	t.Run("up again is a no-op", func(t *testing.T) {
		start := time.Now()
		if err := Up(ctx, c); err != nil {
			t.Fatal(err)
		}
		t.Logf("second Up took %s", time.Since(start).Round(time.Millisecond))
		for i, s := range Status(c) {
			if s.PID != pids[i] || !s.Running {
				t.Errorf("%s: pid %d running=%v, before %d", s.Name, s.PID, s.Running, pids[i])
			}
		}
	})
	t.Run("other settings are refused", func(t *testing.T) {
		c2 := c
		c2.Kafka = KafkaEmbedded
		err := Up(ctx, c2)
		if err == nil || !strings.Contains(err.Error(), "other settings") {
			t.Fatalf("Up with another Kafka mode over a running stack: %v", err)
		}
	})

	downAndCheck(t, c, pids)
}

func TestStackEmbeddedKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Temporal, ClickHouse and NATS processes")
	}
	c, pids := upStack(t, KafkaEmbedded, false, 0)
	t.Run("nats", func(t *testing.T) { checkNATS(t, c) })
	t.Run("kafka", func(t *testing.T) { checkKafka(t, c) })
	downAndCheck(t, c, pids)
}

// TestStackKoalaProcesses runs the controller and two workers on the stack
// (embedded Kafka, to keep it quick) and checks they answer as Up expects;
// the workers serve pprof endpoints (WorkerPprof) whose addresses are found
// through the run dir and gone after Down.
func TestStackKoalaProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the stack plus koala controller and workers")
	}
	c, pids := upStack(t, KafkaEmbedded, true, 2, func(c *Config) {
		c.WorkerPprof = true
		c.UI, c.UIPort = true, freeTestPort(t)
	})
	got, err := PingWorkers(context.Background(), c.NATSURL(), time.Second)
	if err != nil || !got["w1"] || !got["w2"] {
		t.Fatalf("workers answering: %v, %v", got, err)
	}
	eps, err := WorkerPprofEndpoints(c.RunDir)
	if err != nil || len(eps) != 2 {
		t.Fatalf("WorkerPprofEndpoints: %+v, %v; want w1 and w2", eps, err)
	}
	for _, ep := range eps {
		if !strings.HasPrefix(ep.Addr, Host+":") {
			t.Fatalf("worker %s: pprof address %q (%s), want one on %s", ep.ID, ep.Addr, ep.Why, Host)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + ep.Addr + "/debug/pprof/cmdline")
		if err != nil {
			t.Fatalf("worker %s pprof: %v", ep.ID, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "worker") {
			t.Fatalf("worker %s /debug/pprof/cmdline: %s %q", ep.ID, resp.Status, body)
		}
	}
	if !logContains(filepath.Join(c.RunDir, "controller.log"), 0, ControllerReadyLine) {
		t.Logf("controller log lacks %q (Up accepted it as alive for 1 s)", ControllerReadyLine)
	}
	names := map[string]bool{}
	for _, s := range Status(c) {
		names[s.Name] = true
	}
	for _, want := range []string{"controller", "worker-w1", "worker-w2", "ui"} {
		if !names[want] {
			t.Errorf("Status lacks %s", want)
		}
	}
	// koala ui sees the two workers' (empty) job list and its assets.
	for _, path := range []string{"/api/jobs", "/assets/uPlot.iife.min.js"} {
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(c.UIURL() + path)
		if err != nil {
			t.Fatalf("koala ui %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("koala ui %s: %s", path, resp.Status)
		}
	}
	for _, s := range Status(c) {
		if strings.HasPrefix(s.Name, "worker-") && !strings.Contains(s.Addr, "pprof "+Host+":") {
			t.Errorf("Status of %s: addr %q lacks its pprof endpoint", s.Name, s.Addr)
		}
	}
	downAndCheck(t, c, pids)
	if left, _ := filepath.Glob(filepath.Join(c.RunDir, "*"+PprofFileSuffix)); len(left) > 0 {
		t.Errorf("pprof address files left after Down: %v", left)
	}
}

func downAndCheck(t *testing.T, c Config, pids []int) {
	t.Helper()
	start := time.Now()
	if err := Down(c); err != nil {
		t.Fatalf("Down: %v", err)
	}
	t.Logf("Down took %s", time.Since(start).Round(time.Millisecond))
	for _, pid := range pids {
		if alive(pid) || len(sessionMembers(pid)) > 0 {
			t.Errorf("pid %d (or its session) survived Down", pid)
		}
	}
	if left := pidFileNames(c.RunDir); len(left) > 0 {
		t.Errorf("PID files left: %v", left)
	}
	for _, s := range Status(c) {
		if s.Running || s.PID != 0 {
			t.Errorf("after Down: %+v", s)
		}
	}
	if err := Down(c); err != nil {
		t.Errorf("second Down: %v", err)
	}
}

func checkNATS(t *testing.T, c Config) {
	nc, err := nats.Connect(c.NATSURL(), nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Two fake workers answer pings the way `koala worker` does.
	for _, id := range []string{"w1", "w2"} {
		id := id
		if _, err := nc.Subscribe(control.SubjectPing, func(m *nats.Msg) {
			_ = m.Respond([]byte(`{"id":"` + id + `","slots":4}`))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := PingWorkers(context.Background(), c.NATSURL(), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !got["w1"] || !got["w2"] || len(got) != 2 {
		t.Fatalf("ping answered by %v, want w1 and w2", got)
	}
}

func checkKafka(t *testing.T, c Config) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaBrokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "stack-test"
	resp, err := adm.CreateTopic(ctx, 4, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v / %v", err, resp.Err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("hello koala")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaBrokers()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no record consumed within a minute")
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Logf("fetch errors: %v", errs)
		}
		for _, r := range fs.Records() {
			if string(r.Value) == "hello koala" {
				return
			}
		}
	}
}

// freeTestPort is a port on Host that was free a moment ago.
func freeTestPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(Host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
