package runner

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/deploy/local"
	"koala/experiments"
	"koala/experiments/cpuprof"
	"koala/workflows"
)

func TestProfileOptionsValidate(t *testing.T) {
	base := workflows.ExperimentInput{Name: "q", TotalRuntimeSeconds: 90,
		Reconfigurations: []workflows.ReconfigSpec{{TriggerTimeSeconds: 50}, {TriggerTimeSeconds: 30}}}
	for _, tc := range []struct {
		name    string
		o       ProfileOptions
		in      workflows.ExperimentInput
		wantErr string
	}{
		{"default windows", ProfileOptions{After: []int{0, 15}, Seconds: 10}, base, ""},
		{"windows back to back", ProfileOptions{After: []int{0, 10, 20}, Seconds: 10}, base, ""},
		{"overlapping windows", ProfileOptions{After: []int{0, 5}, Seconds: 10}, base, "would overlap"},
		{"windows out of order", ProfileOptions{After: []int{15, 0}, Seconds: 10}, base, "would overlap"},
		{"no window after", ProfileOptions{Seconds: 10}, base, "at least one window"},
		{"before window fits exactly", ProfileOptions{After: []int{0}, Seconds: 29}, base, ""},
		{"before window too long", ProfileOptions{After: []int{0}, Seconds: 30}, base, "want at most 29"},
		{"after window past the run", ProfileOptions{After: []int{0, 55}, Seconds: 10}, base, "past the run's 90 s"},
		{"no seconds", ProfileOptions{After: []int{15}}, base, "--profile-seconds 0"},
		{"negative after", ProfileOptions{After: []int{-1}, Seconds: 5}, base, "--profile-after -1"},
		{"no trigger", ProfileOptions{After: []int{1}, Seconds: 5}, workflows.ExperimentInput{Name: "steady", TotalRuntimeSeconds: 90}, "no Reconfigurations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate(tc.in)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate: %v, want %q", err, tc.wantErr)
			}
		})
	}
	if trig, ok := firstTrigger(base); !ok || trig != 30 {
		t.Fatalf("first trigger %d %v, want the earliest, 30", trig, ok)
	}
}

// writeWorker records a live worker (this process) as the stack does, with
// addr as its pprof endpoint ("" for none).
func writeWorker(t *testing.T, runDir, id, addr string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(runDir, "worker-"+id+".pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if addr != "" {
		if err := os.WriteFile(local.PprofAddrFile(runDir, id), []byte(addr+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNewProfilerNeedsAnEndpoint(t *testing.T) {
	run := t.TempDir()
	writeWorker(t, run, "w1", "")
	base := workflows.ExperimentInput{Name: "q", TotalRuntimeSeconds: 90, Reconfigurations: []workflows.ReconfigSpec{{TriggerTimeSeconds: 30}}}
	_, err := newProfiler(ProfileOptions{RunDir: run, After: []int{0, 15}, Seconds: 10}, base, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--worker-pprof") || !strings.Contains(err.Error(), "1 running workers") {
		t.Fatalf("no endpoint: %v, want an error naming --worker-pprof", err)
	}
}

// A window fetches a real CPU profile from a worker's endpoint (here this
// process's, served as the worker serves it), splits it, and names a
// worker whose endpoint refuses.
func TestProfilerWindowFetchesAndSplits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()

	run, dir := t.TempDir(), t.TempDir()
	writeWorker(t, run, "w1", ln.Addr().String())
	writeWorker(t, run, "w2", deadAddr)
	base := workflows.ExperimentInput{Name: "q", TotalRuntimeSeconds: 90, Reconfigurations: []workflows.ReconfigSpec{{TriggerTimeSeconds: 30}}}
	p, err := newProfiler(ProfileOptions{RunDir: run, After: []int{15}, Seconds: 1}, base, dir)
	if err != nil {
		t.Fatal(err)
	}
	// Something to sample while the profile runs.
	stop := make(chan struct{})
	go func() {
		x := 0
		for {
			select {
			case <-stop:
				return
			default:
				for i := range 100000 {
					x += i
				}
			}
		}
	}()
	out := p.window(context.Background(), "lazy", experiments.WindowAfter, 15, nil)
	close(stop)
	if len(out) != 2 {
		t.Fatalf("%d profiles, want one per worker", len(out))
	}
	w1, w2 := out[0], out[1]
	if w1.Worker != "w1" || w1.Error != "" || w1.Split == nil || w1.File != filepath.Join(dir, "profiles", "lazy-after+15-w1.pprof") {
		t.Fatalf("w1: %+v", w1)
	}
	if w1.Split.CPUSec <= 0 || len(w1.Split.Shares) != len(cpuprof.WorkerCategories)+1 {
		t.Fatalf("w1 split %+v: want CPU sampled, one share per category and other", w1.Split)
	}
	if w2.Worker != "w2" || w2.Split != nil || !strings.Contains(w2.Error, deadAddr) {
		t.Fatalf("w2: %+v, want an error naming its address", w2)
	}
	// A window that could not open records why, for every worker.
	gone := p.window(context.Background(), "lazy", experiments.WindowBefore, -11, context.Canceled)
	if len(gone) != 2 || gone[0].Error != context.Canceled.Error() || gone[0].FromSec != -11 {
		t.Fatalf("window not taken: %+v", gone)
	}

	rp := &runProfile{done: make(chan struct{}), stop: func() {}, out: out}
	close(rp.done)
	ps := rp.wait(control.Deployment{Tasks: []control.TaskRef{{Operator: "count", Index: 1, WorkerID: "w1"}, {Operator: "count", Index: 0, WorkerID: "w1"}}})
	if got := strings.Join(ps[0].Tasks, ","); got != "count-0,count-1" {
		t.Fatalf("w1 tasks %q, want count-0,count-1", got)
	}
	lines := profileLines("[1/1 lazy]", ps)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "[1/1 lazy] profile after (+15 s) w1 (count-0,count-1): ") || !strings.Contains(lines[0], "cores;") {
		t.Fatalf("lines %q", lines)
	}
}
