package experiments_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"koala/deploy/local"
	"koala/experiments/ui"
	"koala/workflows"
)

// envUpdateScreenshots, set to 1, makes TestEndToEndLiveUI write its
// screenshots to docs/ (README shows docs/ui.png) instead of a temporary
// directory.
const envUpdateScreenshots = "KOALA_UPDATE_SCREENSHOTS"

// uiPage is what the test reads off the job page in the browser.
type uiPage struct {
	Tasks    int     `json:"tasks"`    // tasks of operator counter
	Status   string  `json:"status"`   // the reconfiguration panel's status
	ID       string  `json:"id"`       // and its reconfiguration
	Progress float64 `json:"progress"` // migration done, 0..1
	Charts   int     `json:"charts"`   // uPlot charts drawn
	Seconds  int     `json:"seconds"`  // seconds in the source's input rate chart
	Problems string  `json:"problems"`
}

const readUIPage = `(() => {
  const op = document.querySelector('section.op[data-operator="counter"]');
  const rc = document.getElementById('reconfig');
  const pr = document.querySelector('.problems');
  return {
    tasks: op ? Number(op.dataset.tasks) : -1,
    status: rc ? rc.dataset.status : "",
    id: rc ? rc.dataset.id : "",
    progress: rc ? Number(rc.dataset.progress) : 0,
    charts: document.querySelectorAll('.uplot').length,
    seconds: (() => {
      const blob = document.querySelector('script.charts');
      const d = blob ? JSON.parse(blob.textContent)["rate/source-0"] : null;
      return d ? d[0].length : 0;
    })(),
    problems: pr ? pr.textContent : "",
  };
})()`

// TestEndToEndLiveUI runs the lazy counter with 2 counter tasks, starts
// `koala ui` on a free port, opens the job's page in headless Chromium and
// watches it while the counter scales 2→4: the page must show 2 tasks,
// then 4, and the migration progress must reach done. It saves a
// screenshot of the page (docs/ui.png with KOALA_UPDATE_SCREENSHOTS=1).
func TestEndToEndLiveUI(t *testing.T) {
	chromium := chromiumPath(t)
	cfg := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	m := readJSONObject(t, filepath.Join("testdata", "e2e", "lazy_counter.json"))
	m["TotalRuntimeSeconds"] = 75
	m["Reconfigurations"] = []any{}
	// Enough keys, moved at the slowest rate allowed, that the migration
	// lasts a few seconds and the page can be caught in the middle of it.
	m["RatePerSecond"] = 5000
	m["NumKeys"] = 100000
	m["LazyByKeyMigrationBytesPerSecond"] = 64 << 10
	m["KafkaBrokers"] = cfg.KafkaBrokers()
	path := writeJSONObject(t, filepath.Join(t.TempDir(), "live_ui.json"), m)
	id := fmt.Sprintf("e2e-live-ui-%d", time.Now().UnixNano())
	jobID := workflows.JobIDFor(id)
	started := runKoala(ctx, t, cfg.Env(), "run", path, "--detach", "--temporal", cfg.TemporalAddr(),
		"--kafka", strings.Join(cfg.KafkaBrokers(), ","), "--results", t.TempDir(), "--id", id)
	if started.exitCode != 0 {
		t.Fatalf("koala run --detach exited %d\nstderr:\n%s%s", started.exitCode, started.stderr, stackLogTails(cfg))
	}

	base := startKoalaUI(ctx, t, cfg)
	browser := startChromium(ctx, t, chromium)
	pageURL := base + "/jobs/" + jobID
	if err := chromedp.Do(browser, chromedp.Navigate(pageURL)); err != nil {
		t.Fatalf("open %s in Chromium: %v", pageURL, err)
	}
	var last uiPage
	read := func(ctx context.Context) (uiPage, error) {
		p, err := chromedp.Run(browser, chromedp.Evaluate[uiPage](readUIPage))
		if err != nil {
			return p, fmt.Errorf("read the page: %w", err)
		}
		last = p
		return p, nil
	}
	err := poll(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		p, err := read(ctx)
		if err != nil {
			return err
		}
		if p.Tasks != 2 || p.Charts == 0 || p.Seconds < 15 {
			return fmt.Errorf("page shows %d counter tasks, %d charts, %d s of input; want 2 tasks, charts and 15 s of keys to move (problems: %q)",
				p.Tasks, p.Charts, p.Seconds, p.Problems)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("before the scale-out: %v%s", err, stackLogTails(cfg))
	}
	t.Logf("page shows 2 counter tasks, %d charts, %d s of input", last.Charts, last.Seconds)

	// Scale 2→4 (retried while the workflow is not ready for updates);
	// meanwhile the page is watched.
	type result struct {
		out string
		err error
	}
	scaled := make(chan result, 1)
	go func() {
		for {
			cmd := exec.CommandContext(ctx, koalaBinary(t), "reconfigure", "--temporal", cfg.TemporalAddr(),
				"--job", id, "--operator", "counter", "--parallelism", "4")
			cmd.Env = append(cleanEnv(), cfg.Env()...)
			out, err := cmd.CombinedOutput()
			if err != nil && strings.Contains(string(out), "not running yet") && ctx.Err() == nil {
				continue
			}
			scaled <- result{string(out), err}
			return
		}
	}()
	shots := screenshotDir(t)
	caught := false
	err = poll(ctx, 3*time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		p, err := read(ctx)
		if err != nil {
			return err
		}
		if !caught && p.Tasks == 4 && (p.Status == ui.StatusRunning || p.Status == ui.StatusMigrating) && p.Progress > 0 && p.Progress < 1 {
			caught = true
			t.Logf("mid-migration: %+v", p)
			saveScreenshot(t, browser, filepath.Join(shots, "ui-migrating.png"))
		}
		if p.Tasks != 4 || p.Status != ui.StatusDone || p.Progress != 1 {
			return fmt.Errorf("page shows %d counter tasks, reconfiguration %q %s at %.0f%%; want 4 tasks and done (problems: %q)",
				p.Tasks, p.ID, p.Status, 100*p.Progress, p.Problems)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after the scale-out: %v%s", err, stackLogTails(cfg))
	}
	if want := jobID + "-reconfig-1"; last.ID != want {
		t.Errorf("the page shows reconfiguration %q, want %q", last.ID, want)
	}
	t.Logf("page shows 4 counter tasks and migration done (caught it mid-migration: %t)", caught)
	saveScreenshot(t, browser, filepath.Join(shots, "ui.png"))

	res := <-scaled
	if res.err != nil {
		t.Fatalf("koala reconfigure: %v\n%s", res.err, res.out)
	}
	checkUIJSON(ctx, t, base, jobID)

	exactResult(ctx, t, cfg, id)
}

// checkUIJSON reads the job from the JSON endpoints: 4 counter tasks and
// one reconfiguration, done, with a Temporal link.
func checkUIJSON(ctx context.Context, t *testing.T, base, jobID string) {
	t.Helper()
	var v ui.JobView
	getJSON(ctx, t, base+"/api/jobs/"+jobID, &v)
	tasks := -1
	for _, op := range v.Operators {
		if op.Name == "counter" {
			tasks = len(op.Tasks)
			if op.Epoch == 0 {
				t.Errorf("/api/jobs/%s: operator counter has no routing epoch", jobID)
			}
		}
	}
	if tasks != 4 {
		t.Errorf("/api/jobs/%s: %d counter tasks, want 4", jobID, tasks)
	}
	if len(v.Timeline) != 1 || v.Timeline[0].Status != ui.StatusDone || !strings.Contains(v.Timeline[0].TemporalURL, "/workflows/"+jobID+"-reconfig-1") {
		t.Errorf("/api/jobs/%s timeline: %+v, want one reconfiguration, done, linked to its workflow", jobID, v.Timeline)
	}
	var list ui.JobList
	getJSON(ctx, t, base+"/api/jobs", &list)
	found := false
	for _, j := range list.Jobs {
		found = found || (j.ID == jobID && j.Running)
	}
	if !found {
		t.Errorf("/api/jobs does not list %s as running: %+v", jobID, list.Jobs)
	}
}

func getJSON(ctx context.Context, t *testing.T, url string, v any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, res.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, body)
	}
}

// chromiumPath is Debian's chromium, which .ci/run installs: a machine
// without it fails the test rather than skipping it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the stack and a headless Chromium")
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found in PATH: install Debian's chromium (apt-get install chromium; .ci/run does)")
	return ""
}

// startChromium starts a headless Chromium for the test and returns its
// browser context; it is stopped when the test ends.
func startChromium(ctx context.Context, t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1100),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	return bctx
}

// startKoalaUI starts `koala ui` against the stack on a free port and
// returns its base URL; it is stopped (by PID) when the test ends.
func startKoalaUI(ctx context.Context, t *testing.T, cfg local.Config) string {
	t.Helper()
	cmd := exec.Command(koalaBinary(t), "ui", "--addr", "127.0.0.1:0", "--home", cfg.Home, "--run-dir", cfg.RunDir,
		"--nats-port", strconv.Itoa(cfg.NATSPort), "--temporal-ui-port", strconv.Itoa(cfg.TemporalUIPort),
		"--clickhouse-http-port", strconv.Itoa(cfg.ClickHouseHTTPPort), "--clickhouse-tcp-port", strconv.Itoa(cfg.ClickHouseTCPPort))
	cmd.Env = cleanEnv()
	cmd.Stderr = logWriter{t}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start koala ui: %v", err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Logf("koala ui (pid %d) stopped", pid)
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), local.UIReadyLine) {
				lines <- sc.Text()
			}
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatal("koala ui exited before it served")
		}
		base := strings.TrimSpace(strings.TrimPrefix(line, local.UIReadyLine))
		t.Logf("koala ui (pid %d) serves %s", pid, base)
		return base
	case <-timer.C:
		t.Fatal("koala ui did not say it serves within 30 s")
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	return ""
}

// screenshotDir is docs/ with KOALA_UPDATE_SCREENSHOTS=1, else a
// temporary directory.
func screenshotDir(t *testing.T) string {
	if os.Getenv(envUpdateScreenshots) == "1" {
		dir := filepath.Join(repoRoot(t), "docs")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

func saveScreenshot(t *testing.T, browser context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err == nil && len(png) == 0 {
		err = errors.New("empty image")
	}
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", path, len(png))
}
