package activities

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"koala/dataplane/control"
	"koala/dataplane/dptest"
)

// startNATS runs an embedded NATS server on a free port until the
// returned stop is called or the test ends.
func startNATS(t *testing.T) (*server.Server, func()) {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatalf("embedded NATS: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatalf("embedded NATS did not become ready")
	}
	return ns, stopOnce(t, ns)
}

// restartNATS starts a server on port again; safe off the test goroutine.
func restartNATS(t *testing.T, port int) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		t.Errorf("restart embedded NATS: %v", err)
		return
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Errorf("restarted NATS did not become ready")
	}
	stopOnce(t, ns)
}

func stopOnce(t *testing.T, ns *server.Server) func() {
	var once sync.Once
	stop := func() { once.Do(func() { ns.Shutdown(); ns.WaitForShutdown() }) }
	t.Cleanup(stop)
	return stop
}

func connect(t *testing.T, url, name string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect %s to NATS: %v", name, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// beater publishes worker id's heartbeats every 50 ms until stopped.
type beater struct {
	stop chan struct{}
	done chan struct{}
}

func startBeating(nc *nats.Conn, id string) *beater {
	b := &beater{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-tick.C:
				_ = nc.Publish(control.HeartbeatSubject(id), []byte(fmt.Sprintf(`{"id":%q}`, id)))
			}
		}
	}()
	return b
}

func (b *beater) halt() {
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	<-b.done
}

// runWatch runs WatchWorkers in a test activity environment; cancelling
// ctx cancels the activity.
func runWatch(ctx context.Context, acts *Activities, in WatchInput) (time.Duration, error) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	env.SetHeartbeatDetails("")
	env.RegisterActivity(acts)
	start := time.Now()
	_, err := env.ExecuteActivity(acts.WatchWorkers, in)
	return time.Since(start), err
}

func TestWatchWorkers(t *testing.T) {
	const silence = time.Second
	cases := []struct {
		name string
		// stopW2 stops w2's heartbeats this long after the start (0: never).
		stopW2 time.Duration
		// natsDown restarts the NATS server for this long, 300 ms after the
		// start (0: never).
		natsDown time.Duration
		// cancelAfter cancels the watch (the run ended).
		cancelAfter time.Duration
		wantLost    string
		wantWithin  time.Duration
	}{
		{name: "a silent worker is lost", stopW2: 300 * time.Millisecond, cancelAfter: 10 * time.Second, wantLost: "w2",
			wantWithin: 300*time.Millisecond + silence + 600*time.Millisecond},
		{name: "beating workers are not", cancelAfter: 3 * silence},
		{name: "a NATS restart longer than the silence is no evidence", natsDown: 2 * silence, cancelAfter: 2*silence + 3*silence},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns, stopNATS := startNATS(t)
			url := ns.ClientURL()
			port := ns.Addr().(*net.TCPAddr).Port
			acts := &Activities{NC: connect(t, url, "watch")}
			// Workers reconnect after the watch and drop the heartbeats of
			// the outage, as real workers can.
			slow := []nats.Option{nats.ReconnectWait(400 * time.Millisecond), nats.ReconnectBufSize(-1)}
			b1 := startBeating(connect(t, url, "w1", slow...), "w1")
			defer b1.halt()
			b2 := startBeating(connect(t, url, "w2", slow...), "w2")
			defer b2.halt()
			if tc.stopW2 > 0 {
				time.AfterFunc(tc.stopW2, b2.halt)
			}
			if tc.natsDown > 0 {
				time.AfterFunc(300*time.Millisecond, func() {
					stopNATS()
					time.AfterFunc(tc.natsDown, func() { restartNATS(t, port) })
				})
			}
			ctx, cancel := context.WithTimeout(context.Background(), tc.cancelAfter)
			defer cancel()

			took, err := runWatch(ctx, acts, WatchInput{JobID: "job-1", Workers: []string{"w2", "w1"}, SilenceSecs: silence.Seconds()})

			if tc.wantLost == "" {
				if err == nil || !strings.Contains(err.Error(), "canceled") && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("after %s: err = %v, want the watch cancelled and no worker lost", took, err)
				}
				var appErr *temporal.ApplicationError
				if errors.As(err, &appErr) && appErr.Type() == ErrTypeWorkerLost {
					t.Fatalf("after %s: %v, want no worker lost", took, err)
				}
				if took < tc.cancelAfter-100*time.Millisecond {
					t.Fatalf("the watch ended after %s, before it was cancelled (%s): %v", took, tc.cancelAfter, err)
				}
				return
			}
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != ErrTypeWorkerLost {
				t.Fatalf("after %s: err = %v, want a %s error", took, err, ErrTypeWorkerLost)
			}
			if !appErr.NonRetryable() {
				t.Errorf("%v is retryable", err)
			}
			want := fmt.Sprintf("worker %s lost: no heartbeat for %s", tc.wantLost, silence)
			if appErr.Message() != want {
				t.Errorf("message %q, want %q", appErr.Message(), want)
			}
			var detail WorkerLost
			if err := appErr.Details(&detail); err != nil || detail.WorkerID != tc.wantLost || detail.SilentSecs < silence.Seconds() {
				t.Errorf("details %+v (%v), want worker %s silent ≥ %s", detail, err, tc.wantLost, silence)
			}
			if took > tc.wantWithin {
				t.Errorf("lost after %s, want within %s", took, tc.wantWithin)
			}
			t.Logf("%s after %s", appErr.Message(), took.Round(time.Millisecond))
		})
	}
}

// TestWatchWorkersHearsRealWorkers runs the watch against in-process
// workers: their heartbeats (the worker runtime, once a second) arrive on
// the subjects the watch listens to, so none of them is reported lost.
func TestWatchWorkersHearsRealWorkers(t *testing.T) {
	c := dptest.Start(t, dptest.Options{Workers: 2})
	var ids []string
	for _, w := range c.Workers {
		ids = append(ids, w.ID())
	}
	acts := &Activities{NC: connect(t, c.NATSURL, "watch")}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	took, err := runWatch(ctx, acts, WatchInput{JobID: "job-1", Workers: ids, SilenceSecs: 3})
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == ErrTypeWorkerLost {
		t.Fatalf("after %s: %v, want no worker lost", took, err)
	}
	if took < 5*time.Second {
		t.Fatalf("the watch ended after %s, before it was cancelled: %v", took, err)
	}
}
