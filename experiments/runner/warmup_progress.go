package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/schollz/progressbar/v3"

	"koala/dataplane/control"
	"koala/queries"
	"koala/workflows"
)

// Warm-up progress: once a second the workers running the warm-up's job
// (known from their heartbeats) are asked for its tasks' status over
// NATS; the source tasks' records read from Kafka are the records
// processed, the keyed tasks' StateBytes (their stores' size, read at most
// once a second on the worker) the state written so far. A terminal shows
// a progress bar; other output gets a plain line every 5 s.

// warmUpProgress is one reading of a warm-up run.
type warmUpProgress struct {
	Elapsed    time.Duration // since the workflow started
	Records    int64         // read by the source tasks
	Total      int64         // the warm-up's records (warmUpTotal)
	StateBytes uint64        // keyed state in the stores
	Rate       float64       // records/s (rateMeter); 0: not known yet
	Sampled    bool          // a worker answered at least once
}

// warmUpTotal is how many records a warm-up produces: NumEvents per
// producer (as the workflow runs it, workflows/warmup.go), else the
// producers' MaxEvents over all of them.
func warmUpTotal(in workflows.ExperimentInput) int64 {
	if n, err := strconv.ParseInt(in.Params[control.ParamNumEvents], 10, 64); err == nil && n > 0 {
		return n * int64(max(in.Producer.Producers, 1))
	}
	return in.Producer.MaxEvents
}

// gbText is bytes in GB (10⁹ bytes), two decimals.
func gbText(bytes uint64) string {
	return fmt.Sprintf("%.2f GB", float64(bytes)/1e9)
}

// eta is how long the records left take at rate; ok is false when the
// rate is not known or nothing is left to estimate.
func eta(records, total int64, rate float64) (time.Duration, bool) {
	if rate <= 0 || total <= 0 {
		return 0, false
	}
	left := max(total-records, 0)
	return time.Duration(float64(left) / rate * float64(time.Second)).Round(time.Second), true
}

// line is the plain progress line of p.
func (p warmUpProgress) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "warm-up %3.0fs:", p.Elapsed.Seconds())
	if !p.Sampled {
		b.WriteString(" no reading from the job's workers yet")
		return b.String()
	}
	if p.Total > 0 {
		fmt.Fprintf(&b, " %d / %d records (%.1f %%)", p.Records, p.Total, 100*float64(p.Records)/float64(p.Total))
	} else {
		fmt.Fprintf(&b, " %d records", p.Records)
	}
	fmt.Fprintf(&b, ", state %s", gbText(p.StateBytes))
	if p.Rate > 0 {
		fmt.Fprintf(&b, ", %.0f rec/s", p.Rate)
	}
	if p.allRead() {
		b.WriteString(", " + drainingText)
	} else if d, ok := eta(p.Records, p.Total, p.Rate); ok {
		fmt.Fprintf(&b, ", ETA %s", d)
	}
	return b.String()
}

// drainingText follows the progress once every record is read: the
// workflow waits for them to reach the sinks, then snapshots; the
// snapshot compacts each store first (statesvc.Pebble.CompactAll), which
// the state size shows rising and falling while the line stays.
const drainingText = "all read: draining, then snapshot (its stores are compacted first, up to 3 min)"

// allRead says whether the sources read every record of the warm-up.
func (p warmUpProgress) allRead() bool { return p.Total > 0 && p.Records >= p.Total }

// rateMeter is the record rate since the first reading with records: the
// time before the job's first record (deploying) does not count.
type rateMeter struct {
	at   time.Time
	from int64
}

func (m *rateMeter) rate(now time.Time, records int64) float64 {
	if records <= 0 {
		return 0
	}
	if m.at.IsZero() {
		m.at, m.from = now, records
		return 0
	}
	if s := now.Sub(m.at).Seconds(); s > 0 {
		return float64(records-m.from) / s
	}
	return 0
}

// IsTerminal says whether w is a terminal (a character device), where a
// progress bar can be redrawn in place.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressView shows warm-up progress.
type progressView interface {
	update(p warmUpProgress)
	finish()
}

// barView draws a progress bar: records out of the total, the state's
// size (in the description), rate and ETA.
type barView struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func newBarView(w io.Writer, total int64) *barView {
	return &barView{w: w, bar: progressbar.NewOptions64(max(total, 1),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("state 0.00 GB"),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("rec"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetRenderBlankState(true),
	)}
}

// update redraws the bar (updates come once a second: no throttle).
// Both calls draw; the description goes last, so the bar drawn last has
// both the count and the description of p.
func (v *barView) update(p warmUpProgress) {
	_ = v.bar.Set64(min(p.Records, v.bar.GetMax64()))
	desc := "state " + gbText(p.StateBytes)
	if p.allRead() {
		desc += ", " + drainingText
	}
	v.bar.Describe(desc)
}

// finish leaves the bar as last drawn and ends its line.
func (v *barView) finish() {
	_ = v.bar.Exit()
	fmt.Fprintln(v.w)
}

// lineView prints a plain line at most every interval.
type lineView struct {
	w        io.Writer
	interval time.Duration
	last     time.Time
	now      func() time.Time
}

func (v *lineView) update(p warmUpProgress) {
	if now := v.now(); v.last.IsZero() || now.Sub(v.last) >= v.interval {
		v.last = now
		fmt.Fprintln(v.w, " ", p.line())
	}
}

func (v *lineView) finish() {}

// newProgressView is a bar on a terminal, plain lines every 5 s elsewhere.
func newProgressView(w io.Writer, total int64) progressView {
	if IsTerminal(w) {
		return newBarView(w, total)
	}
	return &lineView{w: w, interval: 5 * time.Second, now: time.Now}
}

// jobSampler reads a running job's progress from its workers.
type jobSampler struct {
	nc      *nats.Conn
	job     string
	sources []string // the query's source operators

	mu      sync.Mutex
	workers map[string]time.Time // worker → last heartbeat naming a task of the job
	sub     *nats.Subscription
}

// newJobSampler follows the workers' heartbeats for the workers that run
// job, a job of in's query. Close unsubscribes.
func newJobSampler(nc *nats.Conn, job string, in workflows.ExperimentInput) (*jobSampler, error) {
	ops, err := queries.OperatorsFor(in.QueryName, nil, in.Params)
	if err != nil {
		return nil, fmt.Errorf("warm-up progress: operators of query %s: %w", in.QueryName, err)
	}
	s := &jobSampler{nc: nc, job: job, workers: map[string]time.Time{}}
	for _, op := range ops {
		if len(op.Inputs) == 0 {
			s.sources = append(s.sources, op.Name)
		}
	}
	s.sub, err = nc.Subscribe(control.SubjectHeartbeatBase+".*", s.heard)
	if err != nil {
		return nil, fmt.Errorf("warm-up progress: subscribe to worker heartbeats: %w", err)
	}
	return s, nil
}

func (s *jobSampler) heard(msg *nats.Msg) {
	var info control.WorkerInfo
	if json.Unmarshal(msg.Data, &info) != nil || info.ID == "" {
		return
	}
	if slices.ContainsFunc(info.Tasks, func(k string) bool { return strings.HasPrefix(k, s.job+"/") }) {
		s.mu.Lock()
		s.workers[info.ID] = time.Now()
		s.mu.Unlock()
	}
}

// sample sums the job's source records and state bytes over the workers
// heard from in the last 5 s; ok is false when none answered.
func (s *jobSampler) sample(ctx context.Context) (records int64, stateBytes uint64, ok bool) {
	s.mu.Lock()
	var ws []string
	for w, at := range s.workers {
		if time.Since(at) <= 5*time.Second {
			ws = append(ws, w)
		}
	}
	s.mu.Unlock()
	for _, w := range ws {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := WorkerStatus(rctx, s.nc, s.job, w, nil)
		cancel()
		if err != nil {
			return 0, 0, false // a partial sum would make the bar jump back
		}
		for _, t := range st.Tasks {
			if slices.Contains(s.sources, t.Operator) {
				records += int64(t.RecordsIn)
			}
			stateBytes += t.StateBytes
		}
	}
	return records, stateBytes, len(ws) > 0
}

func (s *jobSampler) Close() { _ = s.sub.Unsubscribe() }
