package autoscale

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Defaults of a Policy (see WithDefaults).
const (
	DefaultIntervalSeconds       = 10
	DefaultWindowSeconds         = 20
	DefaultTargetUtilization     = 0.7
	DefaultCatchUpSeconds        = 30
	DefaultStabilizationSeconds  = 15
	DefaultScaleDownDelaySeconds = 60
	DefaultMinChange             = 1
	DefaultReversalDrop          = 0.2
)

// Policy is how the autoscaler decides. In a workflow input a zero field
// takes its default (WithDefaults); the CLI and the config parser fill the
// defaults themselves and reject zeros that are out of range.
type Policy struct {
	// IntervalSeconds between two decisions (a tick).
	IntervalSeconds float64 `json:"interval_seconds,omitempty"`
	// WindowSeconds of metrics a decision is computed from (at most: a
	// window never reaches into the stabilization after a reconfiguration).
	WindowSeconds float64 `json:"window_seconds,omitempty"`
	// TargetUtilization is the busy fraction DS2 sizes each task for, in (0, 1].
	TargetUtilization float64 `json:"target_utilization,omitempty"`
	// CatchUpSeconds: the sources' Kafka lag is to be drained within this
	// time, on top of the input rate.
	CatchUpSeconds float64 `json:"catch_up_seconds,omitempty"`
	// StabilizationSeconds after a reconfiguration ended whose metrics are
	// not used (the migration's and the catch-up's seconds).
	StabilizationSeconds float64 `json:"stabilization_seconds,omitempty"`
	// ScaleDownDelaySeconds DS2 must ask for fewer tasks before a scale-in.
	ScaleDownDelaySeconds float64 `json:"scale_down_delay_seconds,omitempty"`
	// MinChange is the least change of parallelism, in tasks, worth a
	// reconfiguration.
	MinChange int `json:"min_change,omitempty"`
	// MaxParallelism caps every operator (0: NumBuckets).
	MaxParallelism int `json:"max_parallelism,omitempty"`
	// ReversalDrop: an operator the autoscaler scaled out is scaled in
	// again only once its input rate fell by this fraction below the rate
	// that made it scale out (no oscillation), in [0, 1).
	ReversalDrop float64 `json:"reversal_drop,omitempty"`
	// Operators the autoscaler may reconfigure (empty: every operator that
	// is neither a source nor a sink). The others' targets are computed
	// and shown, never acted on.
	Operators []string `json:"operators,omitempty"`
	// Protocol, when set, must be the job's ReconfigProtocol: a
	// "reconfigure" update runs the protocol of the job it is sent to.
	Protocol string `json:"protocol,omitempty"`
}

// DefaultPolicy is the policy of `koala autoscale` without flags.
func DefaultPolicy() Policy { return Policy{}.WithDefaults() }

// WithDefaults returns p with every zero field set to its default.
// MaxParallelism 0 stays 0 (NumBuckets), Operators empty stays empty.
func (p Policy) WithDefaults() Policy {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&p.IntervalSeconds, DefaultIntervalSeconds)
	def(&p.WindowSeconds, DefaultWindowSeconds)
	def(&p.TargetUtilization, DefaultTargetUtilization)
	def(&p.CatchUpSeconds, DefaultCatchUpSeconds)
	def(&p.StabilizationSeconds, DefaultStabilizationSeconds)
	def(&p.ScaleDownDelaySeconds, DefaultScaleDownDelaySeconds)
	def(&p.ReversalDrop, DefaultReversalDrop)
	if p.MinChange == 0 {
		p.MinChange = DefaultMinChange
	}
	return p
}

// Field names a Policy field in errors: its workflow-input and config
// name, and the `koala autoscale` flag that sets it.
type Field struct{ Name, Flag string }

// The fields of a Policy.
var (
	FieldInterval       = Field{"IntervalSeconds", "--interval"}
	FieldWindow         = Field{"WindowSeconds", "--window"}
	FieldUtilization    = Field{"TargetUtilization", "--target-utilization"}
	FieldCatchUp        = Field{"CatchUpSeconds", "--catch-up"}
	FieldStabilization  = Field{"StabilizationSeconds", "--stabilization"}
	FieldScaleDownDelay = Field{"ScaleDownDelaySeconds", "--scale-down-delay"}
	FieldMinChange      = Field{"MinChange", "--min-change"}
	FieldMaxParallelism = Field{"MaxParallelism", "--max-parallelism"}
	FieldReversalDrop   = Field{"ReversalDrop", "--reversal-drop"}
	FieldOperators      = Field{"Operators", "--operators"}
	FieldProtocol       = Field{"Protocol", "--protocol"}
	FieldJob            = Field{"JobID", "--job"}
)

func (f Field) String() string { return fmt.Sprintf("%s (%s)", f.Name, f.Flag) }

// fieldError is one bad field.
func fieldError(f Field, format string, args ...any) error {
	return fmt.Errorf("%s: %s", f, fmt.Sprintf(format, args...))
}

// Validate checks the policy on its own (see ValidateFor for the checks
// against a job); every problem is reported, each naming its field and
// flag. Call it on a policy with its defaults filled.
func (p Policy) Validate() error {
	var errs []error
	positive := func(f Field, v float64) {
		if !(v > 0) || math.IsInf(v, 0) {
			errs = append(errs, fieldError(f, "%g must be > 0 seconds", v))
		}
	}
	nonNegative := func(f Field, v float64) {
		if !(v >= 0) || math.IsInf(v, 0) {
			errs = append(errs, fieldError(f, "%g must be ≥ 0 seconds", v))
		}
	}
	positive(FieldInterval, p.IntervalSeconds)
	if p.WindowSeconds < 2 || math.IsInf(p.WindowSeconds, 0) || math.IsNaN(p.WindowSeconds) {
		errs = append(errs, fieldError(FieldWindow, "%g must be ≥ 2 seconds (metrics are per second)", p.WindowSeconds))
	}
	if !(p.TargetUtilization > 0 && p.TargetUtilization <= 1) {
		errs = append(errs, fieldError(FieldUtilization, "%g is outside (0, 1]: it is the busy fraction each task is sized for", p.TargetUtilization))
	}
	positive(FieldCatchUp, p.CatchUpSeconds)
	nonNegative(FieldStabilization, p.StabilizationSeconds)
	nonNegative(FieldScaleDownDelay, p.ScaleDownDelaySeconds)
	if p.MinChange < 1 {
		errs = append(errs, fieldError(FieldMinChange, "%d must be ≥ 1 task", p.MinChange))
	}
	if p.MaxParallelism < 0 {
		errs = append(errs, fieldError(FieldMaxParallelism, "%d must be ≥ 1 (or 0: NumBuckets)", p.MaxParallelism))
	}
	if !(p.ReversalDrop >= 0 && p.ReversalDrop < 1) {
		errs = append(errs, fieldError(FieldReversalDrop, "%g is outside [0, 1)", p.ReversalDrop))
	}
	for i, op := range p.Operators {
		if strings.TrimSpace(op) == "" {
			errs = append(errs, fieldError(FieldOperators, "entry %d is empty", i))
		}
	}
	return errors.Join(errs...)
}

// ValidateFor checks the policy against the job it is to scale: the job
// runs, MaxParallelism is at most its NumBuckets, every listed operator
// exists and is not a source, and Protocol (when set) is the job's.
func (p Policy) ValidateFor(job JobState) error {
	if job.Status == StatusEnded {
		return fieldError(FieldJob, "job %s is not running (%s): there is nothing to autoscale", job.JobID, job.Detail)
	}
	var errs []error
	if p.MaxParallelism > job.NumBuckets {
		errs = append(errs, fieldError(FieldMaxParallelism, "%d is above the job's NumBuckets (%d): an operator cannot have more tasks than buckets", p.MaxParallelism, job.NumBuckets))
	}
	for _, name := range p.Operators {
		op, ok := job.Operator(name)
		switch {
		case !ok:
			errs = append(errs, fieldError(FieldOperators, "operator %q is not in job %s (operators: %s)", name, job.JobID, strings.Join(job.OperatorNames(), ", ")))
		case op.Source:
			errs = append(errs, fieldError(FieldOperators, "operator %q is a source: sources read Kafka partitions and are not rescaled", name))
		}
	}
	if p.Protocol != "" && p.Protocol != job.Protocol {
		errs = append(errs, fieldError(FieldProtocol, "%q, but job %s reconfigures with %q (its ReconfigProtocol): a reconfigure update runs the job's protocol; start the job with ReconfigProtocol %q or leave %s out",
			p.Protocol, job.JobID, job.Protocol, p.Protocol, FieldProtocol.Flag))
	}
	return errors.Join(errs...)
}

// Scaled tells whether the autoscaler may reconfigure op.
func (p Policy) Scaled(op Operator) bool {
	if len(p.Operators) > 0 {
		return slices.Contains(p.Operators, op.Name)
	}
	return !op.Source && !op.Sink
}

// Interval is IntervalSeconds as a duration.
func (p Policy) Interval() time.Duration { return seconds(p.IntervalSeconds) }

// MinWindowSeconds is the shortest window a decision is made from: half
// the window, at least 2 s.
func (p Policy) MinWindowSeconds() float64 { return max(2, p.WindowSeconds/2) }

// WindowStart is where the metrics window ending at `to` starts: Window
// before it, but never before the stabilization after lastChange ended.
func (p Policy) WindowStart(to, lastChange time.Time) time.Time {
	from := to.Add(-seconds(p.WindowSeconds))
	if stable := lastChange.Add(seconds(p.StabilizationSeconds)); !lastChange.IsZero() && stable.After(from) {
		from = stable.Truncate(time.Second)
		if from.Before(stable) {
			from = from.Add(time.Second) // whole seconds after the stabilization
		}
	}
	return from
}

// NextWindowEnd is the end of the next tick's metrics window: an interval
// after the previous one, and late enough that a window after the
// stabilization that follows lastChange can be MinWindowSeconds long.
func (p Policy) NextWindowEnd(prev, lastChange time.Time) time.Time {
	var next time.Time
	if !prev.IsZero() {
		next = prev.Add(p.Interval())
	}
	if !lastChange.IsZero() {
		ready := p.WindowStart(lastChange, lastChange).Add(seconds(p.MinWindowSeconds()))
		if ready.After(next) {
			next = ready
		}
	}
	return next
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
