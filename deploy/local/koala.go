package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"koala/dataplane/control"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ControllerReadyLine is what `koala controller` prints once it serves.
const ControllerReadyLine = "controller ready"

// WorkerIDs are the ids of the configured workers: w1..wN.
func (c Config) WorkerIDs() []string {
	ids := make([]string, c.Workers)
	for i := range ids {
		ids[i] = fmt.Sprintf("w%d", i+1)
	}
	return ids
}

func controllerProcess(c Config) *process {
	dir := filepath.Join(c.RunDir, "controller")
	return &process{
		name: "controller",
		addr: "temporal " + c.TemporalAddr(),
		argv: []string{c.KoalaBinary, "controller"},
		env:  append(c.Env(), "KOALA_DATA_DIR="+dir),
		prepare: func(context.Context) error {
			return os.MkdirAll(dir, 0o755)
		},
		// Ready when the log says so, or when it has stayed up for 1 s.
		ready: func(_ context.Context, p *process, started time.Time, offset int64) error {
			if logContains(p.logFile(c.RunDir), offset, ControllerReadyLine) {
				return nil
			}
			if time.Since(started) >= time.Second {
				return nil // alive (waitReady checks) for a second
			}
			return fmt.Errorf("no %q in its log yet", ControllerReadyLine)
		},
		readyTimeout: 30 * time.Second,
		stopTimeout:  15 * time.Second,
	}
}

func workerProcess(c Config, id string) *process {
	dir := filepath.Join(c.RunDir, "worker-"+id)
	env := append(c.Env(),
		"KOALA_WORKER_ID="+id,
		"KOALA_DATA_DIR="+dir,
		"KOALA_LISTEN="+Host+":0",
	)
	addrFile := PprofAddrFile(c.RunDir, id)
	if c.WorkerPprof {
		env = append(env, "KOALA_PPROF_LISTEN="+Host+":0", "KOALA_PPROF_ADDR_FILE="+addrFile)
	}
	return &process{
		name: "worker-" + id,
		addr: "nats " + control.SubjectPing + " id=" + id,
		argv: []string{c.KoalaBinary, "worker"},
		env:  env,
		prepare: func(context.Context) error {
			// An address file left by a killed worker names a dead port.
			if err := os.Remove(addrFile); err != nil && !os.IsNotExist(err) {
				return err
			}
			return os.MkdirAll(dir, 0o755)
		},
		// Workers are checked together by waitWorkers; alone, a worker
		// is ready when it answers a ping (and, with WorkerPprof, has
		// recorded its pprof address).
		ready: func(ctx context.Context, _ *process, _ time.Time, _ int64) error {
			if c.WorkerPprof {
				if _, err := readPprofAddr(addrFile); err != nil {
					return err
				}
			}
			got, err := PingWorkers(ctx, c.NATSURL(), 500*time.Millisecond, c.NATSSecurity)
			if err != nil {
				return err
			}
			if !got[id] {
				return fmt.Errorf("worker %s does not answer on %s yet", id, control.SubjectPing)
			}
			return nil
		},
		readyTimeout: 30 * time.Second,
		stopTimeout:  15 * time.Second,
	}
}

// logContains reports whether the log file, from offset on, contains s.
func logContains(path string, offset int64, s string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() <= offset {
		return false
	}
	size := st.Size() - offset
	if size > 16<<20 {
		size = 16 << 20
	}
	buf := make([]byte, size)
	n, _ := f.ReadAt(buf, offset)
	return bytes.Contains(buf[:n], []byte(s))
}

// pingWorkers publishes one ping with a reply inbox and collects the ids in
// the replies that arrive within wait, or until every id in want answered.
func pingWorkers(ctx context.Context, nc *nats.Conn, wait time.Duration, want ...string) (map[string]bool, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait+5*time.Second)
		defer cancel()
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("ping workers: subscribe: %w", err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(control.SubjectPing, inbox, []byte(`{}`)); err != nil {
		return nil, fmt.Errorf("ping workers: publish: %w", err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return nil, fmt.Errorf("ping workers: flush: %w", err)
	}
	got := map[string]bool{}
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return got, nil
		}
		msg, err := sub.NextMsg(left)
		if err != nil {
			return got, nil // timeout: done collecting
		}
		var r struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(msg.Data, &r) == nil && r.ID != "" {
			got[r.ID] = true
		}
		if len(want) > 0 && allIn(want, got) {
			return got, nil
		}
	}
}

// waitWorkers polls pings until every expected worker answered, a worker
// process died, or the timeout passed.
func waitWorkers(ctx context.Context, c Config, procs []*process, pids []int, timeout time.Duration) error {
	if len(procs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := natsConnect(ctx, c.NATSURL(), c.NATSSecurity)
	if err != nil {
		return fmt.Errorf("workers: connect %s: %w", c.NATSURL(), err)
	}
	defer nc.Close()
	want := c.WorkerIDs()
	start := time.Now()
	seen := map[string]bool{}
	for {
		got, err := pingWorkers(ctx, nc, 300*time.Millisecond, want...)
		if err != nil {
			return err
		}
		for id := range got {
			seen[id] = true
		}
		var missing []string
		for _, id := range want {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 && c.WorkerPprof {
			// The endpoint binds before the worker joins NATS, so its
			// address file is there by now unless the worker failed.
			for _, id := range want {
				addr, err := readPprofAddr(PprofAddrFile(c.RunDir, id))
				if err != nil {
					return fmt.Errorf("worker %s: %w", id, err)
				}
				c.progressf("up: worker-%-5s pprof http://%s/debug/pprof/", id, addr)
			}
		}
		if len(missing) == 0 {
			c.progressf("up: workers %s answer on %s (%s)", strings.Join(want, ","), control.SubjectPing, time.Since(start).Round(time.Millisecond))
			return nil
		}
		for i, p := range procs {
			if !alive(pids[i]) {
				return p.failure(c.RunDir, fmt.Errorf("process %d exited before it answered on %s", pids[i], control.SubjectPing))
			}
		}
		if ctx.Err() != nil {
			sort.Strings(missing)
			var first *process
			for i, p := range procs {
				if p.name == "worker-"+missing[0] {
					first = procs[i]
				}
			}
			err := fmt.Errorf("workers %s did not answer on %s within %s", strings.Join(missing, ","), control.SubjectPing, timeout)
			if first != nil {
				return first.failure(c.RunDir, err)
			}
			return err
		}
	}
}

func allIn(ids []string, set map[string]bool) bool {
	for _, id := range ids {
		if !set[id] {
			return false
		}
	}
	return true
}
