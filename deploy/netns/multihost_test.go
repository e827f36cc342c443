package netns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"koala/dataplane/control"
	"koala/dataplane/dptest/testpki"
	"koala/dataplane/transport"
	"koala/deploy/local"
	"koala/workflows"
)

// cluster is the emulated multi-host deployment: Temporal, NATS, Kafka and
// the controller on the control host (the root namespace), one worker per
// namespace.
type cluster struct {
	ip        string
	net       *hostNet
	bin       string
	logDir    string
	temporal  string // 127.0.0.1:port, used only on the control host
	natsURL   string
	natsSec   transport.NATSSecurity
	kafka     string
	env       []string // what every koala process gets
	workerIDs []string
	procs     []*proc
}

const natsPassword = "multihost-n4ts-secret"

// TestMultiHost runs the lazy protocol over three worker hosts with NATS
// password authentication and TLS, and mutual TLS on the data-plane gRPC,
// then cuts one host's link during a migration.
func TestMultiHost(t *testing.T) {
	ip := requireIP(t)
	c := startCluster(t, ip, 3)

	t.Run("lazy-scale-out-exact", func(t *testing.T) {
		res, out := c.runExperiment(t, "mh-exact", nil)
		if out.err != nil {
			t.Fatalf("koala run: %v\nstdout:\n%s\nstderr:\n%s%s", out.err, out.stdout, out.stderr, c.tails())
		}
		if !strings.Contains(out.stdout, "lost=0 duplicated=0 reordered=0") {
			t.Errorf("summary lacks lost=0 duplicated=0 reordered=0:\n%s", out.stdout)
		}
		t.Logf("produced %d, sink distinct %d, lost %d, duplicated %d", res.Produced, res.Sink.Distinct, res.Lost, res.Duplicated)
		if res.Produced <= 0 || res.Lost != 0 || res.Duplicated != 0 || int64(res.Sink.Distinct) != res.Produced {
			t.Errorf("not exact: produced %d, sink distinct %d, lost %d, duplicated %d", res.Produced, res.Sink.Distinct, res.Lost, res.Duplicated)
		}
		// The counter ran on several hosts, each reached at its namespace address.
		hosts := map[string]bool{}
		counters := 0
		for _, tr := range res.Final.Tasks {
			if tr.Operator != "counter" {
				continue
			}
			counters++
			h, _, err := net.SplitHostPort(tr.DataAddr)
			if err != nil || !c.isWorkerIP(h) {
				t.Errorf("task %s on %s at %q: not a worker host address %v", tr.ID, tr.WorkerID, tr.DataAddr, c.net.nsIPs)
			}
			hosts[h] = true
		}
		if counters != 4 || len(hosts) < 2 {
			t.Errorf("after the scale-out: %d counter tasks on hosts %v, want 4 on at least 2 hosts", counters, hosts)
		}
		for i, p := range c.procs {
			if strings.Contains(p.logText(), natsPassword) {
				t.Errorf("log of %s (process %d) contains the NATS password", p.name, i)
			}
		}
	})

	t.Run("link-cut-during-migration", func(t *testing.T) {
		// w3 hosts counter-1 from the start, so the migration needs it.
		victim := len(c.net.nsNames) - 1
		vid, vip := c.workerIDs[victim], c.net.nsIPs[victim]
		cut := func(ctx context.Context, tc client.Client, childID string) error {
			// Cut as soon as the reconfiguration's child workflow runs.
			if err := poll(ctx, 5*time.Minute, 50*time.Millisecond, nil, func(ctx context.Context) error {
				_, err := tc.DescribeWorkflowExecution(ctx, childID, "")
				return err
			}); err != nil {
				return fmt.Errorf("reconfiguration %s never started: %w", childID, err)
			}
			out, err := exec.Command(c.ip, "-n", c.net.nsNames[victim], "link", "set", c.net.nsLinks[victim], "down").CombinedOutput()
			if err != nil {
				return fmt.Errorf("cut link of %s: %v: %s", vid, err, out)
			}
			t.Logf("cut the link of host %s (worker %s, %s) at the start of %s", c.net.nsNames[victim], vid, vip, childID)
			return nil
		}
		res, out := c.runExperiment(t, "mh-cut", cut)
		msg := out.stdout + out.stderr
		switch {
		case out.err == nil:
			t.Logf("completed despite the cut: produced %d, sink distinct %d, lost %d, duplicated %d", res.Produced, res.Sink.Distinct, res.Lost, res.Duplicated)
			if res.Lost != 0 || res.Duplicated != 0 || int64(res.Sink.Distinct) != res.Produced {
				t.Errorf("completed with a wrong answer: produced %d, sink distinct %d, lost %d, duplicated %d", res.Produced, res.Sink.Distinct, res.Lost, res.Duplicated)
			}
		case errors.Is(out.err, context.DeadlineExceeded):
			t.Errorf("no outcome within %s after the cut (hung)\nstdout:\n%s%s", out.took, out.stdout, c.tails())
		default:
			t.Logf("failed after the cut in %s: %s", out.took.Round(time.Millisecond), lastLines(out.stderr, 5))
			if !strings.Contains(msg, vid) && !strings.Contains(msg, vip) {
				t.Errorf("the failure does not name the unreachable worker %s (%s):\n%s%s", vid, vip, msg, c.tails())
			}
		}
	})
}

// startCluster builds the hosts and starts every process, ready.
func startCluster(t *testing.T, ip string, workers int) *cluster {
	t.Helper()
	work := t.TempDir()
	c := &cluster{ip: ip, logDir: filepath.Join(work, "logs")}
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	c.bin = buildKoala(t, work)
	c.net = newHostNet(t, ip, workers)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.tails())
		}
	})

	pki, err := testpki.NewCA(work, "koala")
	if err != nil {
		t.Fatal(err)
	}
	natsCert, err := pki.Issue("nats", c.net.hostIP)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := local.FreePortConfig(koalaHome(t), work)
	if err != nil {
		t.Fatal(err)
	}
	c.temporal = cfg.TemporalAddr()
	natsPort, kafkaPort := freePort(t, c.net.hostIP), freePort(t, c.net.hostIP)
	c.natsURL = "nats://" + net.JoinHostPort(c.net.hostIP, natsPort)
	c.kafka = net.JoinHostPort(c.net.hostIP, kafkaPort)
	c.natsSec = transport.NATSSecurity{User: "koala", Password: natsPassword, TLSCA: pki.CertFile}
	c.env = []string{
		"KOALA_TEMPORAL_ADDR=" + c.temporal,
		"KOALA_NATS_URL=" + c.natsURL,
		"KOALA_NATS_USER=koala", "KOALA_NATS_PASSWORD=" + natsPassword,
		"KOALA_NATS_TLS_CA=" + pki.CertFile,
		"KOALA_KAFKA_BROKERS=" + c.kafka,
		"KOALA_CLICKHOUSE_URL=none",
	}
	ctx := context.Background()

	temporal := start(t, ip, c.logDir, "temporal", "", nil, cfg.TemporalBinary(), "server", "start-dev",
		"--ip", "127.0.0.1", "--port", strconv.Itoa(cfg.TemporalPort), "--headless", "--log-level", "warn",
		"--dynamic-config-value", "history.transferProcessorMaxPollRPS=10000")
	natsProc := start(t, ip, c.logDir, "nats", "", append(c.env,
		"KOALA_NATS_SERVER_TLS_CERT="+natsCert.CertFile, "KOALA_NATS_SERVER_TLS_KEY="+natsCert.KeyFile),
		c.bin, "nats-server", "--addr", net.JoinHostPort(c.net.hostIP, natsPort))
	kafka := start(t, ip, c.logDir, "kafka", "", c.env, c.bin, "kafka-fake", "--addr", c.kafka, "--partitions", "4")
	c.procs = append(c.procs, temporal, natsProc, kafka)

	if err := poll(ctx, 2*time.Minute, 200*time.Millisecond, c.procs, func(ctx context.Context) error {
		nc, err := transport.ConnectNATS(c.natsURL, c.natsSec, nats.Timeout(time.Second))
		if err != nil {
			return err
		}
		nc.Close()
		d := net.Dialer{Timeout: time.Second}
		conn, err := d.DialContext(ctx, "tcp", c.kafka)
		if err != nil {
			return fmt.Errorf("kafka-fake: %w", err)
		}
		conn.Close()
		tc, err := dialTemporal(ctx, c.temporal)
		if err != nil {
			return err
		}
		tc.Close()
		return nil
	}); err != nil {
		t.Fatalf("services not ready: %v%s", err, c.tails())
	}

	controller := start(t, ip, c.logDir, "controller", "", c.env, c.bin, "controller")
	c.procs = append(c.procs, controller)
	for i, ns := range c.net.nsNames {
		id := fmt.Sprintf("w%d", i+1)
		cert, err := pki.Issue("worker-"+id, c.net.nsIPs[i])
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(work, "worker-"+id)
		env := append(append([]string{}, c.env...),
			"KOALA_WORKER_ID="+id, "KOALA_DATA_DIR="+dir,
			"KOALA_GRPC_TLS_CERT="+cert.CertFile, "KOALA_GRPC_TLS_KEY="+cert.KeyFile,
			"KOALA_GRPC_TLS_CA="+pki.CertFile, "KOALA_GRPC_TLS_MUTUAL=1")
		w := start(t, ip, c.logDir, "worker-"+id, ns, env, c.bin, "worker", "--listen", net.JoinHostPort(c.net.nsIPs[i], "0"))
		c.procs = append(c.procs, w)
		c.workerIDs = append(c.workerIDs, id)
	}
	if err := poll(ctx, 2*time.Minute, 300*time.Millisecond, c.procs, func(ctx context.Context) error {
		if !strings.Contains(controller.logText(), local.ControllerReadyLine) {
			return errors.New("controller not ready")
		}
		got, err := c.ping()
		if err != nil {
			return err
		}
		for i, id := range c.workerIDs {
			addr, ok := got[id]
			if !ok {
				return fmt.Errorf("worker %s does not answer pings (have %v)", id, got)
			}
			if h, _, _ := net.SplitHostPort(addr); h != c.net.nsIPs[i] {
				return fmt.Errorf("worker %s serves at %s, want host %s", id, addr, c.net.nsIPs[i])
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("cluster not ready: %v%s", err, c.tails())
	}
	t.Logf("cluster up: nats %s (password, TLS), kafka %s, temporal %s, workers %v at %v (mutual TLS)", c.natsURL, c.kafka, c.temporal, c.workerIDs, c.net.nsIPs)
	return c
}

// ping asks every worker for its info over NATS, as the controller does.
func (c *cluster) ping() (map[string]string, error) {
	nc, err := transport.ConnectNATS(c.natsURL, c.natsSec, nats.Timeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	if err := nc.PublishRequest(control.SubjectPing, inbox, []byte(`{}`)); err != nil {
		return nil, err
	}
	got := map[string]string{}
	for {
		msg, err := sub.NextMsg(500 * time.Millisecond)
		if err != nil {
			return got, nil // no more replies
		}
		var info control.WorkerInfo
		if json.Unmarshal(msg.Data, &info) == nil {
			got[info.ID] = info.DataAddr
		}
	}
}

func (c *cluster) isWorkerIP(h string) bool {
	for _, ip := range c.net.nsIPs {
		if h == ip {
			return true
		}
	}
	return false
}

func (c *cluster) tails() string {
	var b strings.Builder
	for _, p := range c.procs {
		b.WriteString(p.tail(15))
	}
	return b.String()
}

type runOutcome struct {
	stdout, stderr string
	err            error // nil: exit 0; context.DeadlineExceeded: no outcome in time
	took           time.Duration
}

// runExperiment runs a lazy counter 2→4 through `koala run` on the control
// host; during, if set, runs alongside with the reconfiguration's child
// workflow id. It returns the workflow result when the workflow completed.
func (c *cluster) runExperiment(t *testing.T, prefix string, during func(context.Context, client.Client, string) error) (workflows.ExperimentResult, runOutcome) {
	t.Helper()
	const total = 20
	cfg := map[string]any{
		"QueryName": "counter", "TotalRuntimeSeconds": total,
		"Reconfigurations": []map[string]any{{"TriggerTimeSeconds": 8, "Type": "scaleup", "TargetOperator": "counter", "TargetParrallelism": 4}},
		"ReconfigProtocol": "lazy", "StateBackendType": "pebble",
		"SourceParallelism": 1, "CounterParallelism": 2, "SinkParallelism": 1,
		"NumPartitions": 4, "RatePerSecond": 2000, "NumKeys": 2000,
		"KafkaBrokers": []string{c.kafka},
	}
	data, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), prefix+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	childID := workflows.JobIDFor(id) + "-reconfig-1"

	ctx, cancel := context.WithTimeout(context.Background(), total*time.Second+5*time.Minute)
	defer cancel()
	tc, err := dialTemporal(ctx, c.temporal)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	duringErr := make(chan error, 1)
	if during != nil {
		go func() { duringErr <- during(ctx, tc, childID) }()
	} else {
		duringErr <- nil
	}

	cmd := exec.CommandContext(ctx, c.bin, "run", path, "--id", id, "--results", t.TempDir())
	cmd.Env = append(cleanEnv(), c.env...)
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin := time.Now()
	err = cmd.Run()
	out := runOutcome{stdout: stdout.String(), stderr: stderr.String(), err: err, took: time.Since(begin)}
	if ctx.Err() != nil {
		out.err = context.DeadlineExceeded
	}
	t.Logf("koala run %s: %v in %s", id, out.err, out.took.Round(time.Millisecond))
	if err := <-duringErr; err != nil {
		t.Fatal(err)
	}
	var res workflows.ExperimentResult
	if out.err == nil {
		if err := tc.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			t.Fatalf("result of %s: %v", id, err)
		}
	}
	return res, out
}

func dialTemporal(ctx context.Context, addr string) (client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	c, err := client.DialContext(dctx, client.Options{HostPort: addr, Namespace: "default", Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("temporal at %s: %w", addr, err)
	}
	return c, nil
}

// koalaHome is the install cache the stack's Temporal CLI comes from:
// $KOALA_HOME, or <repo>/.koala where `make test` installs it (koala stack
// install) before running the tests.
func koalaHome(t *testing.T) string {
	t.Helper()
	home := os.Getenv(control.EnvHome)
	if home == "" {
		dir, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				break
			}
			if parent := filepath.Dir(dir); parent != dir {
				dir = parent
				continue
			}
			t.Fatal("go.mod not found above the test directory")
		}
		home = filepath.Join(dir, control.DefaultHome)
	}
	if _, err := os.Stat(filepath.Join(home, "bin", "temporal")); err != nil {
		t.Fatalf("no Temporal CLI under %s (set %s, or run `make test`, which installs it with koala stack install): %v", home, control.EnvHome, err)
	}
	return home
}

// freePort is a port free on host right now.
func freePort(t *testing.T, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
