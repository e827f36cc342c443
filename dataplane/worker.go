package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/credentials"

	"koala/dataplane/budget"
	"koala/dataplane/control"
	"koala/dataplane/exchange"
	"koala/dataplane/kafkaio"
	"koala/dataplane/metrics"
	"koala/dataplane/produce"
	"koala/dataplane/transport"
	"koala/dataplane/wire"
)

// Options configure a worker.
type Options struct {
	ID       string // unique worker id, e.g. "w1"
	NATSURL  string
	Listen   string // data-plane gRPC listen address; port 0 picks a free one
	DataDir  string
	Slots    int
	Recorder metrics.Recorder
	Logger   *slog.Logger
	// KafkaOpts are added to every Kafka client (tests, TLS, SASL).
	KafkaOpts []kgo.Opt
	// NATSSecurity and GRPCTLS secure the control and data connections
	// (zero values: no credentials, plaintext).
	NATSSecurity transport.NATSSecurity
	GRPCTLS      transport.GRPCTLS
	// HeartbeatInterval defaults to one second.
	HeartbeatInterval time.Duration
	// Faults injects faults into the worker's tasks (tests); nil: none.
	Faults Faults
}

// Faults are the points where tests inject faults into a worker's tasks.
type Faults interface {
	// BeforeBatch runs on a task's goroutine before it processes a batch
	// of n records; a slow implementation makes a slow operator, so tests
	// can build a backlog where a protocol must keep order across it.
	BeforeBatch(jobID, operator, taskID string, n int)
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	var errs []error
	if o.ID == "" {
		errs = append(errs, errors.New("worker option ID: must not be empty"))
	}
	if o.NATSURL == "" {
		errs = append(errs, errors.New("worker option NATSURL: must not be empty"))
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if host, port, err := net.SplitHostPort(o.Listen); err != nil {
		errs = append(errs, fmt.Errorf("worker option Listen %q: want host:port: %w", o.Listen, err))
	} else if host == "" {
		// ":port" stays on loopback; other interfaces take an explicit host.
		o.Listen = net.JoinHostPort("127.0.0.1", port)
	}
	if o.Slots < 0 {
		errs = append(errs, fmt.Errorf("worker option Slots %d: must be ≥ 0 (0 = unlimited)", o.Slots))
	}
	if o.Recorder == nil {
		o.Recorder = metrics.Nop{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = time.Second
	}
	if err := o.NATSSecurity.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("worker option NATSSecurity: %w", err))
	}
	if err := o.GRPCTLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("worker option GRPCTLS: %w", err))
	}
	return errors.Join(errs...)
}

// Worker hosts task slots of any number of jobs.
type Worker struct {
	opts Options
	log  *slog.Logger
	nc   *nats.Conn
	lis  net.Listener
	addr string
	// grpcServerCreds and grpcClientCreds secure the record exchange and
	// state fetches (plaintext unless Options.GRPCTLS is set).
	grpcServerCreds, grpcClientCreds credentials.TransportCredentials

	mu        sync.Mutex
	tasks     map[string]*task // by job/task
	producers map[string]*produce.Producer
	known     map[string]control.Deployment // by job: newest state of each operator seen here (handlers.go)
	// stoppedJobs are jobs whose tasks were stopped here: frames still in
	// flight to those tasks are stale (deliverLocal drops and counts them).
	stoppedJobs map[string]bool
	staleFrames atomic.Uint64

	ctx   context.Context
	peers *exchange.Peers
	state *exchange.StateConns
	// credits are acknowledgements on their way to sources on other
	// workers, and holds on senders there (credit_return.go).
	credits creditReturns
	// holds are the holds receivers put on this worker's tasks
	// (route_hold.go).
	holds sendHolds
}

// NewWorker connects to NATS and opens the data-plane listener.
func NewWorker(opts Options) (*Worker, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	serverCreds, err := opts.GRPCTLS.ServerCredentials()
	if err != nil {
		return nil, fmt.Errorf("worker %s: %w", opts.ID, err)
	}
	clientCreds, err := opts.GRPCTLS.ClientCredentials()
	if err != nil {
		return nil, fmt.Errorf("worker %s: %w", opts.ID, err)
	}
	nc, err := transport.ConnectNATS(opts.NATSURL, opts.NATSSecurity, nats.Name("koala-worker-"+opts.ID), nats.MaxReconnects(-1), nats.Timeout(3*time.Second))
	if err != nil {
		return nil, fmt.Errorf("worker %s: %w", opts.ID, err)
	}
	lis, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("worker %s: listen on %s: %w", opts.ID, opts.Listen, err)
	}
	log := opts.Logger.With("worker", opts.ID)
	transport.WarnPlaintext(log, "data-plane gRPC", lis.Addr(), opts.GRPCTLS)
	return &Worker{
		opts: opts, log: log, nc: nc, lis: lis, addr: lis.Addr().String(),
		grpcServerCreds: serverCreds, grpcClientCreds: clientCreds, state: exchange.NewStateConns(clientCreds),
		tasks: map[string]*task{}, producers: map[string]*produce.Producer{},
	}, nil
}

// Addr is the data-plane address other workers send records to.
func (w *Worker) Addr() string { return w.addr }

// ID is the worker id.
func (w *Worker) ID() string { return w.opts.ID }

// Run serves until ctx ends, then stops every task and producer.
func (w *Worker) Run(ctx context.Context) error {
	w.ctx = ctx
	w.peers = exchange.NewPeers(ctx, w.log, w.grpcClientCreds)
	srv := exchange.NewServer(exchangeHandler{w}, w.grpcServerCreds)
	go func() { _ = srv.Serve(w.lis) }()
	go w.returnCredits(ctx)
	defer srv.Stop()
	defer w.nc.Close()
	defer w.state.Close()

	subs := []*nats.Subscription{}
	for _, subj := range []string{control.WorkerWildcard(w.opts.ID), control.SubjectPing} {
		sub, err := w.nc.Subscribe(subj, w.handleRequest)
		if err != nil {
			return fmt.Errorf("worker %s: subscribe %s: %w", w.opts.ID, subj, err)
		}
		subs = append(subs, sub)
	}
	if err := w.nc.Flush(); err != nil {
		return fmt.Errorf("worker %s: NATS flush: %w", w.opts.ID, err)
	}
	w.log.Info("worker ready", "data_addr", w.addr, "nats", transport.RedactURL(w.opts.NATSURL), "grpc_tls", w.opts.GRPCTLS.Enabled())

	hb := time.NewTicker(w.opts.HeartbeatInterval)
	defer hb.Stop()
	metricsTick := time.NewTicker(time.Second)
	defer metricsTick.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			w.shutdown()
			return nil
		case <-hb.C:
			w.heartbeat()
		case now := <-metricsTick.C:
			w.emitMetrics(now)
		}
	}
}

func (w *Worker) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.mu.Lock()
	tasks := make([]*task, 0, len(w.tasks))
	for _, t := range w.tasks {
		tasks = append(tasks, t)
	}
	prods := make([]*produce.Producer, 0, len(w.producers))
	for _, p := range w.producers {
		prods = append(prods, p)
	}
	w.mu.Unlock()
	for _, p := range prods {
		p.Stop(ctx)
	}
	for _, t := range tasks {
		start := time.Now()
		if err := t.stop(ctx); err != nil {
			w.log.Warn("stop task", "task", t.id, "err", err)
		}
		w.log.Debug("task stopped", "task", t.id, "took", time.Since(start))
	}
}

func (w *Worker) info() control.WorkerInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	info := control.WorkerInfo{ID: w.opts.ID, DataAddr: w.addr, Slots: w.opts.Slots}
	for k := range w.tasks {
		info.Tasks = append(info.Tasks, k)
	}
	sort.Strings(info.Tasks)
	return info
}

func (w *Worker) heartbeat() {
	data, err := json.Marshal(w.info())
	if err == nil {
		_ = w.nc.Publish(control.HeartbeatSubject(w.opts.ID), data)
	}
}

// deliverLocal hands a frame to a task on this worker, blocking while the
// task's inbox is full (backpressure).
func (w *Worker) deliverLocal(ctx context.Context, f *wire.Frame) error {
	if f.Kind == wire.FrameCredit {
		// Applied at once, never queued: a source's credit must not wait
		// behind the records it is meant to release (credit_return.go),
		// nor a lifted hold behind the records it holds (route_hold.go).
		if f.BarrierID != "" {
			w.onHoldFrame(f)
			return nil
		}
		w.creditLocal(f.JobID, f.ToTask, f.FromTask, f.Seq)
		return nil
	}
	w.mu.Lock()
	t := w.tasks[f.JobID+"/"+f.ToTask]
	w.mu.Unlock()
	if t == nil && w.jobStopped(f.JobID) {
		w.dropStale(f)
		return nil
	}
	if t == nil || t.inbox == nil {
		// Never drop silently: the sender learns through the stream error and
		// the log names the frame.
		err := fmt.Errorf("worker %s: no task %q of job %q for a %v frame from %s", w.opts.ID, f.ToTask, f.JobID, f.Kind, f.FromTask)
		w.log.Error("undeliverable frame", "err", err, "records", len(f.Records))
		return err
	}
	// Data frames also wait for room in records (TaskInboxMaxRecords);
	// nextFrame returns it when the task takes the frame.
	n := 0
	if f.Kind == wire.FrameData && t.inboxRecs != nil {
		n = len(f.Records)
		ok, err := t.inboxRecs.Acquire(ctx, n, t.ended())
		if err != nil {
			return err
		}
		if !ok {
			w.dropStale(f)
			return nil
		}
	}
	select {
	case t.inbox <- f:
		return nil
	case <-t.ended():
		// The task stopped while the frame waited for room: nothing reads
		// its inbox any more, and waiting would block the whole stream.
		if n > 0 {
			t.inboxRecs.Release(n)
		}
		w.dropStale(f)
		return nil
	case <-ctx.Done():
		if n > 0 {
			t.inboxRecs.Release(n)
		}
		return ctx.Err()
	}
}

// jobStopped reports whether tasks of job were stopped on this worker.
func (w *Worker) jobStopped(jobID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stoppedJobs[jobID]
}

// dropStale discards a frame for a task that was stopped here (a task
// stopped at the end of a run, by a reconfiguration, or before a recovery
// redeploys the job from a checkpoint, which replays that input anyway).
// It is counted and logged, not sent back as a stream error: that would
// reset the stream and lose the frames queued behind it.
func (w *Worker) dropStale(f *wire.Frame) {
	n := w.staleFrames.Add(1)
	if n == 1 || n%1000 == 0 {
		w.log.Warn("dropped frames for stopped tasks", "total", n, "job", f.JobID, "task", f.ToTask, "from", f.FromTask, "kind", f.Kind, "records", len(f.Records))
	}
}

// deliver sends f to target, in memory when it lives here, else over gRPC.
func (w *Worker) deliver(ctx context.Context, target control.TaskRef, f *wire.Frame) error {
	if target.WorkerID == w.opts.ID {
		return w.deliverLocal(ctx, f)
	}
	return w.peers.Send(ctx, target.DataAddr, f)
}

func (w *Worker) announceProgress(p control.MigrationProgress) {
	data, _ := json.Marshal(p)
	if err := w.nc.Publish(control.ProgressSubject(p.JobID), data); err != nil {
		w.log.Error("announce migration progress", "job", p.JobID, "event", p.Event, "err", err)
	}
}

func (w *Worker) announceBarrier(jobID, taskID, barrierID string) {
	data, _ := json.Marshal(control.BarrierAligned{JobID: jobID, TaskID: taskID, BarrierID: barrierID})
	if err := w.nc.Publish(control.BarrierSubject(jobID), data); err != nil {
		w.log.Error("announce barrier", "job", jobID, "barrier", barrierID, "err", err)
	}
}

func (w *Worker) emitMetrics(now time.Time) {
	w.mu.Lock()
	tasks := make([]*task, 0, len(w.tasks))
	for _, t := range w.tasks {
		tasks = append(tasks, t)
	}
	w.mu.Unlock()
	sec := now.Truncate(time.Second)
	for _, t := range tasks {
		if !t.started.Load() {
			continue
		}
		batches := t.stats.batches.Swap(0)
		nanos := t.stats.batchNanos.Swap(0)
		row := metrics.TaskRow{
			Time: sec, Experiment: t.view.Load().job.Experiment, Job: t.jobID, Operator: t.opName, Task: t.id, Worker: w.opts.ID,
			RecordsIn: t.stats.recordsIn.Load(), RecordsOut: t.stats.recordsOut.Load(), Batches: batches,
			BatchTimeMaxUs: float64(t.stats.batchMaxNano.Swap(0)) / 1e3,
			KafkaLag:       t.stats.kafkaLag.Load(),
		}
		if batches > 0 {
			row.BatchTimeAvgUs = float64(nanos) / float64(batches) / 1e3
		}
		// The first row of a task covers one tick of this loop.
		interval := time.Second
		if !t.lastEmit.IsZero() {
			interval = now.Sub(t.lastEmit)
		}
		t.lastEmit = now
		row.IdleRatio = waitRatio(t.stats.idle.take(now), interval)
		row.BackpressureRatio = waitRatio(t.stats.blocked.take(now), interval)
		if hist, err := t.stats.batchHist.Take(); err != nil {
			w.log.Warn("batch-time histogram not recorded", "task", t.id, "err", err)
		} else {
			row.BatchTimeHDR = hist
		}
		if ks := t.keyed; ks != nil {
			lookups := ks.lookupCount.Swap(0)
			if lookups > 0 {
				row.KeyLookupUs = float64(ks.lookupNanos.Swap(0)) / float64(lookups) / 1e3
				row.MultiGetUs = float64(ks.getNanos.Swap(0)) / float64(lookups) / 1e3
				row.MultiPutUs = float64(ks.putNanos.Swap(0)) / float64(lookups) / 1e3
				row.KeysPerBatch = float64(ks.distinctKeys.Swap(0)) / float64(lookups)
			}
			fetched, moved := ks.keysFetched.Load(), ks.bytesMoved.Load()
			row.KeysFetched, row.BytesTransferred = fetched-t.lastFetched, moved-t.lastMoved
			t.lastFetched, t.lastMoved = fetched, moved
			row.KLTSize, row.KLTBytes = uint64(ks.klt.Len()), ks.klt.Bytes()
		}
		dead := t.dead.Counts()
		row.Malformed, row.Oversize = dead.Malformed-t.lastDead.Malformed, dead.Oversize-t.lastDead.Oversize
		row.DeadLettered = dead.Written - t.lastDead.Written
		t.lastDead = dead
		if c, ok := t.op.(CounterReporter); ok {
			late := c.Counters()["late_records"]
			row.LateEvents = late - t.lastLate
			t.lastLate = late
		}
		// Rows carry per-second deltas; the absolute counters stay for status.
		in, out := row.RecordsIn, row.RecordsOut
		row.RecordsIn = in - t.lastIn
		row.RecordsOut = out - t.lastOut
		t.lastIn, t.lastOut = in, out
		w.opts.Recorder.RecordTask(row)
	}
}

// createTask builds (but does not start) one task of dep.
func (w *Worker) createTask(dep control.Deployment, ref control.TaskRef, start map[int32]int64) (*task, error) {
	spec, ok := dep.Job.Operator(ref.Operator)
	if !ok {
		return nil, fmt.Errorf("task %s: operator %q is not in job %s", ref.ID, ref.Operator, dep.Job.JobID)
	}
	t := &task{w: w, jobID: dep.Job.JobID, id: ref.ID, opName: ref.Operator, index: ref.Index, spec: spec, ctlNudge: make(chan struct{}, 1)}
	t.view.Store(newTaskView(dep, ref.Operator))
	t.out.blocked = &t.stats.blocked
	hold, err := control.ReconfigHoldBytes(dep.Job)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", ref.ID, err)
	}
	t.holdLimit = hold
	dead, err := kafkaio.NewDeadLetters(dep.Job, ref.Operator, ref.ID, w.opts.KafkaOpts, w.log)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", ref.ID, err)
	}
	t.dead = dead
	if spec.Kind == control.KindKafkaSource {
		parallelism := len(dep.TasksOf(ref.Operator))
		parts := kafkaio.Partitions(dep.Job.Partitions, parallelism, ref.Index)
		fetch, err := kafkaio.FetchOptions(dep.Job)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", ref.ID, err)
		}
		ahead, err := ReadAheadOf(dep.Job)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", ref.ID, err)
		}
		// Checked again when the first watermark is computed; here, a bad
		// value fails the deployment rather than a running task.
		if _, err := sourceIdleRule(dep.Job.Params); err != nil {
			return nil, fmt.Errorf("task %s: job param %w", ref.ID, err)
		}
		// The worker's own Kafka options come last, so they may override.
		src, err := newSourceState(dep.Job.KafkaBrokers, dep.Job.Topic, parts, start, append(fetch, w.opts.KafkaOpts...), ahead)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", ref.ID, err)
		}
		t.source = src
		return t, nil
	}
	dataDir := ""
	if w.opts.DataDir != "" {
		dataDir = filepath.Join(w.opts.DataDir, dep.Job.JobID, ref.ID)
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, fmt.Errorf("task %s: data dir: %w", ref.ID, err)
		}
	}
	op, err := newOperator(OperatorContext{Job: dep.Job, Spec: spec, TaskID: ref.ID, Index: ref.Index, DataDir: dataDir, Logger: w.log.With("task", ref.ID), DeadLetters: dead})
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", ref.ID, err)
	}
	t.op = op
	t.lateBounder, _ = op.(LateBounder)
	if t.cost, err = control.SyntheticCost(dep.Job, ref.Operator); err != nil {
		return nil, fmt.Errorf("task %s: %w", ref.ID, err)
	}
	t.inbox = make(chan *wire.Frame, 64)
	inboxRecords, err := control.TaskInboxMaxRecords(dep.Job)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", ref.ID, err)
	}
	t.inboxRecs = budget.New(inboxRecords)
	if len(dep.Job.Downstreams(ref.Operator)) == 0 {
		if spec.Kind == control.KindCollectSink {
			t.values = newKeyValues()
		}
		t.ledger = newSinkLedger(dep.Job.ExactnessUnchecked == "" && dep.Job.OrderUnchecked == "", t.values)
		t.latency = newSinkLatency()
	}
	if sop, ok := op.(StatefulOperator); ok {
		if !spec.Keyed {
			return nil, fmt.Errorf("task %s: operator %q keeps keyed state, so its input must be keyed", ref.ID, spec.Name)
		}
		if dataDir == "" && dep.Job.StateBackend != "memory" {
			return nil, fmt.Errorf("task %s: %s state needs the worker's data directory (--data-dir)", ref.ID, dep.Job.StateBackend)
		}
		ks, err := newKeyedState(sop, dep.Job, ref.Operator, filepath.Join(dataDir, "state"), w.grpcClientCreds)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", ref.ID, err)
		}
		t.keyed = ks
		ks.pipe.maxHeld = fetchHeldInboxes * inboxRecords
	}
	return t, nil
}
