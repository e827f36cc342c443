package bench

import (
	"fmt"
	"strings"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/experiments"
)

// Steady is one steady-state run: a query without reconfiguration at a fixed
// input rate.
type Steady struct {
	Row        string  `json:"row"`   // the row's name (rows.go)
	Phase      string  `json:"phase"` // PhaseSteady or PhaseLargeState
	Query      string  `json:"query"`
	Operator   string  `json:"operator"` // whose batch latency is reported
	Unit       string  `json:"unit,omitempty"`
	Backend    string  `json:"state_backend"`
	Rate       int     `json:"rate_per_sec"` // producer's target rate
	RuntimeSec int     `json:"runtime_sec"`
	Target     float64 `json:"target_events_per_cpu_sec"`
	// SustainedTarget is the rate the row must sustain (0: none).
	SustainedTarget float64 `json:"sustained_target,omitempty"`
	// MinStateBytes > 0: the targets need this much state on disk at the
	// window's start, read past the value caches (stateProof).
	MinStateBytes float64 `json:"min_state_bytes,omitempty"`
	// Tuned says what a tuned row changes from a user's defaults; such a
	// row is never judged.
	Tuned string `json:"tuned,omitempty"`
	// The shape the row ran with: tasks of the source and of Operator,
	// and the source's Kafka fetch sizes (the defaults unless tuned).
	SourceTasks    int `json:"source_tasks"`
	OperatorTasks  int `json:"operator_tasks"`
	FetchMinBytes  int `json:"fetch_min_bytes"`
	FetchMaxWaitMs int `json:"fetch_max_wait_ms"`
	// WarmUp is the run that built a large-state row's state.
	WarmUp *WarmUpRun `json:"warm_up,omitempty"`

	WorkflowID string `json:"workflow_id,omitempty"`
	JobID      string `json:"job_id,omitempty"`
	Status     string `json:"status"`
	Reason     string `json:"reason,omitempty"`

	WorkerPIDs  []int    `json:"worker_pids,omitempty"` // the workers whose CPU is the pipeline's
	TaskWorkers []string `json:"task_workers,omitempty"`
	// ProducerWorkers run the input generators and host no task; their
	// processes (ProducerPIDs) are sampled apart. Empty: the producers ran
	// inside the task workers and their CPU is part of CPUSeconds.
	ProducerWorkers []string `json:"producer_workers,omitempty"`
	ProducerPIDs    []int    `json:"producer_pids,omitempty"`
	// TaskPlacement is the run's initial task placement (the config's
	// TaskPlacement; empty: round robin).
	TaskPlacement string `json:"task_placement,omitempty"`

	// Window on the job's metric axis (seconds since its first metric row).
	WindowFrom float64 `json:"window_from_sec"`
	WindowTo   float64 `json:"window_to_sec"`

	CountedAt    string  `json:"counted_at"` // operator whose records_in are the events (the sink, or an aggregation's input)
	SinkEvents   float64 `json:"sink_events"`
	EventsPerSec float64 `json:"sink_events_per_sec"`
	CPUSeconds   float64 `json:"worker_cpu_seconds"`
	CoresUsed    float64 `json:"worker_cores_used"`
	// ProducerCPUSeconds and ProducerCores are the producer workers' CPU
	// over the window (0 without ProducerWorkers).
	ProducerCPUSeconds float64 `json:"producer_cpu_seconds,omitempty"`
	ProducerCores      float64 `json:"producer_cores_used,omitempty"`
	MachineCores       float64 `json:"machine_cores_busy"` // all processes of the machine, same window
	EventsPerCPUSec    float64 `json:"events_per_cpu_sec"`
	SustainedRatio     float64 `json:"sustained_ratio"`  // sink events/s ÷ target rate
	ProducedPerSec     float64 `json:"produced_per_sec"` // records the producer got acknowledged ÷ runtime
	MaxLag             float64 `json:"max_kafka_lag"`
	EndLag             float64 `json:"end_kafka_lag"`
	// LagRead says the window has at least two lag points; LagGrowth is
	// their least-squares slope × the window's length, in records: how
	// far the pipeline fell behind its producers over the window.
	LagRead   bool    `json:"lag_read"`
	StartLag  float64 `json:"start_kafka_lag"`
	LagGrowth float64 `json:"lag_growth"`

	// State is the keyed state at the window's start and what the
	// operator's value caches answered over it.
	State StateWindow `json:"state"`

	// Per-batch processing time of the operator's tasks over the window:
	// percentiles of one HDR histogram of every batch (merged from the
	// tasks' per-second batch_time_hdr rows), in µs. BatchCount is the
	// number of batches; 0 leaves the figures unset.
	BatchP50Us float64 `json:"batch_p50_us"`
	BatchP99Us float64 `json:"batch_p99_us"`
	BatchMaxUs float64 `json:"batch_max_us"`
	BatchCount uint64  `json:"batch_count"`
	BatchError string  `json:"batch_error,omitempty"` // histogram rows that could not be decoded

	// E2E is producer → sink latency from the sink tasks' HDR histograms
	// (whole job, warm-up and drain included); nil for queries whose sink
	// does not get the input records (ExactnessUnchecked set).
	E2E *control.Latency `json:"e2e_latency,omitempty"`

	// ExactnessUnchecked is the run's reason why the sink ledger cannot
	// check this query (it filters, joins or aggregates); Lost and
	// Duplicated then mean nothing.
	ExactnessUnchecked string `json:"exactness_unchecked,omitempty"`
	Produced           int64  `json:"produced"`
	Lost               int64  `json:"lost"`
	Duplicated         int64  `json:"duplicated"`
}

// SteadyInputs is what ComputeSteady needs of one finished run.
type SteadyInputs struct {
	Sink       []metrics.Point
	Lag        []metrics.Point
	Batches    []metrics.BatchHistSample // the operator's per-task per-second batch-time histograms
	JobStart   time.Time
	CPU        []CPUSample
	From, To   float64 // window on the metric axis
	TargetRate int
	State      []StateSample // the run's state readings (nil: none)
}

// ComputeSteady fills the measured figures of s from in. Events are the sink
// seconds wholly inside [From, To); CPU is interpolated at the same wall-clock
// bounds. It is pure.
func ComputeSteady(s Steady, in SteadyInputs) Steady {
	sink := experiments.CleanPoints(in.Sink)
	var events float64
	n := 0
	for _, p := range sink {
		if p.Sec >= in.From && p.Sec+1 <= in.To {
			events += p.Value
			n++
		}
	}
	s.WindowFrom, s.WindowTo = in.From, in.To
	s.SinkEvents = events
	span := in.To - in.From
	if span > 0 {
		s.EventsPerSec = events / span
	}
	if in.TargetRate > 0 {
		s.SustainedRatio = s.EventsPerSec / float64(in.TargetRate)
	}
	at := func(sec float64) time.Time { return in.JobStart.Add(time.Duration(sec * float64(time.Second))) }
	c0, ok0 := CPUAt(in.CPU, at(in.From))
	c1, ok1 := CPUAt(in.CPU, at(in.To))
	if ok0 && ok1 && c1 > c0 {
		s.CPUSeconds = c1 - c0
		if span > 0 {
			s.CoresUsed = s.CPUSeconds / span
		}
		s.EventsPerCPUSec = events / s.CPUSeconds
	}
	p0, okp0 := producerAt(in.CPU, at(in.From))
	p1, okp1 := producerAt(in.CPU, at(in.To))
	if okp0 && okp1 && p1 > p0 {
		s.ProducerCPUSeconds = p1 - p0
		if span > 0 {
			s.ProducerCores = s.ProducerCPUSeconds / span
		}
	}
	m0, okm0 := machineAt(in.CPU, at(in.From))
	m1, okm1 := machineAt(in.CPU, at(in.To))
	if okm0 && okm1 && m1 > m0 && span > 0 {
		s.MachineCores = (m1 - m0) / span
	}
	var lagX, lagY []float64
	for _, p := range experiments.CleanPoints(in.Lag) {
		if p.Sec >= in.From && p.Sec+1 <= in.To {
			if len(lagX) == 0 {
				s.StartLag = p.Value
			}
			s.MaxLag = max(s.MaxLag, p.Value)
			s.EndLag = p.Value
			lagX, lagY = append(lagX, p.Sec), append(lagY, p.Value)
		}
	}
	if slope, ok := experiments.Slope(lagX, lagY); ok && span > 0 {
		s.LagRead, s.LagGrowth = true, slope*span
	}
	s.State = StateAtWindow(in.State, at(in.From), at(in.To))
	p, ok, err := metrics.BatchHistWindow(in.Batches, in.From, in.To)
	switch {
	case err != nil:
		s.BatchError = err.Error()
	case ok:
		s.BatchCount = p.Count
		s.BatchP50Us, s.BatchP99Us, s.BatchMaxUs = float64(p.P50Us), float64(p.P99Us), float64(p.MaxUs)
	}
	return s
}

// eventsText is the events/s cell: marked with the operator when it is not
// the sink.
func (s Steady) eventsText() string {
	if s.CountedAt != "" && s.CountedAt != "sink" {
		return fmt.Sprintf("%.0f (*%s)", s.EventsPerSec, s.CountedAt)
	}
	return fmt.Sprintf("%.0f", s.EventsPerSec)
}

// MergeSinkLatency summarises the sink tasks' latencies: one task's as is;
// with several, the largest of each percentile (an upper bound, since the
// histograms themselves are not merged) and the summed counts.
func MergeSinkLatency(ls []control.Latency) *control.Latency {
	if len(ls) == 0 {
		return nil
	}
	out := ls[0]
	for _, l := range ls[1:] {
		out.Count += l.Count
		out.Clamped += l.Clamped
		out.Future += l.Future
		out.P50Us = max(out.P50Us, l.P50Us)
		out.P99Us = max(out.P99Us, l.P99Us)
		out.P999Us = max(out.P999Us, l.P999Us)
		out.MaxUs = max(out.MaxUs, l.MaxUs)
	}
	return &out
}

// producerText is the producer CPU cell: the producer workers' cores, or
// where the producers' CPU went when they shared the task workers.
func (s Steady) producerText() string {
	if len(s.ProducerWorkers) == 0 {
		return "in worker CPU"
	}
	return fmt.Sprintf("%.2f (%s)", s.ProducerCores, strings.Join(s.ProducerWorkers, ","))
}

// batchText is a batch-time cell: n/a without batches in the window.
func (s Steady) batchText(us float64) string {
	if s.BatchCount == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f ms", us/1000)
}

// E2EText is the latency cell of the steady-state table.
func (s Steady) E2EText() string {
	if s.E2E == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f / %.1f ms", float64(s.E2E.P50Us)/1000, float64(s.E2E.P99Us)/1000, float64(s.E2E.P999Us)/1000, float64(s.E2E.MaxUs)/1000)
}

// perCPUWithProducers is events per CPU-second counting the producer
// workers too (the figure comparable with runs whose producers shared the
// task workers); 0 without CPU figures.
func (s Steady) perCPUWithProducers() float64 {
	if c := s.CPUSeconds + s.ProducerCPUSeconds; c > 0 && s.CPUSeconds > 0 {
		return s.SinkEvents / c
	}
	return 0
}
