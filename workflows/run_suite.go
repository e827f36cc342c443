package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// SuiteEntry is one experiment of a suite: a keyword naming the variant
// (e.g. "lazy_200kKeys") and the RunExperiment input.
type SuiteEntry struct {
	Keyword string          `json:"keyword"`
	Input   ExperimentInput `json:"input"`
	// MaxAttempts runs a failed experiment again, up to this many runs in
	// all (0 or 1: once), as the artifact's suites do on flaky clusters.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// CooldownSeconds is the pause after this experiment before the next.
	CooldownSeconds int `json:"cooldown_seconds,omitempty"`
}

// SuiteInput is the input of RunSuite: the suite's name and its experiments,
// run in this order.
type SuiteInput struct {
	Name    string       `json:"name"`
	Entries []SuiteEntry `json:"entries"`
	// RetryDelaySeconds is the pause before another attempt of a failed
	// experiment.
	RetryDelaySeconds int `json:"retry_delay_seconds,omitempty"`
	// StopOnFailure ends the suite at the first experiment that failed
	// every attempt; the rest are not run.
	StopOnFailure bool `json:"stop_on_failure,omitempty"`
}

// Status of a suite entry (the artifact's words).
const (
	SuiteSucceeded = "SUCCEEDED"
	SuiteFailed    = "FAILED"
)

// SuiteEntryResult is the outcome of one entry.
type SuiteEntryResult struct {
	Index      int     `json:"index"` // 1-based
	Keyword    string  `json:"keyword"`
	Experiment string  `json:"experiment"`
	Status     string  `json:"status"`
	Seconds    float64 `json:"seconds"`
	WorkflowID string  `json:"workflow_id"`
	JobID      string  `json:"job_id"`
	Error      string  `json:"error,omitempty"`
	Produced   int64   `json:"produced"`
	Lost       int64   `json:"lost"`
	// ExactnessUnchecked: see ExperimentResult.
	ExactnessUnchecked string `json:"exactness_unchecked,omitempty"`
	Duplicated         int64  `json:"duplicated"`
	// Reordered: see ExperimentResult.
	Reordered int64 `json:"reordered,omitempty"`
	// Attempts is how many runs the entry took (see SuiteEntry.MaxAttempts).
	Attempts int `json:"attempts,omitempty"`
	// What `koala figures` needs to place the run on its metric axis.
	StartedAt    time.Time         `json:"started_at"`
	MetricsStart time.Time         `json:"metrics_start,omitempty"`
	Reconfigs    []ReconfigOutcome `json:"reconfigs,omitempty"`
	Protocol     string            `json:"protocol"`
	StateBackend string            `json:"state_backend"`
	TotalRuntime int               `json:"total_runtime_seconds"`
}

// SuiteResult is what RunSuite returns, one result per entry in order.
type SuiteResult struct {
	Name    string             `json:"name"`
	Entries []SuiteEntryResult `json:"entries"`
}

// SuiteProgressQuery is the query type answered by RunSuite with a
// SuiteProgress.
const SuiteProgressQuery = "progress"

// SuiteProgress is the live state of a suite.
type SuiteProgress struct {
	Total   int    `json:"total"`
	Current int    `json:"current"` // 1-based index of the running entry, 0 when none
	Keyword string `json:"keyword"`
	// ChildID is the running entry's RunExperiment workflow id.
	ChildID   string             `json:"child_id"`
	StartedAt time.Time          `json:"started_at"` // of the running entry
	Done      []SuiteEntryResult `json:"done"`
}

// SuiteChildID is the deterministic workflow id of entry index (1-based):
// <suite-id>-<index>-<keyword>, made safe for ids and job names.
func SuiteChildID(suiteID string, index int, keyword string) string {
	return JobIDFor(fmt.Sprintf("%s-%d-%s", suiteID, index, keyword))
}

// RunSuite runs the suite's experiments one after another, each as a child
// RunExperiment workflow with a deterministic id (SuiteChildID). A failed
// experiment is recorded as FAILED and the suite goes on. Because the
// children's ids are fixed and their completions are recorded in this
// workflow's history, a controller restart replays completed entries from
// history: it neither loses nor repeats them.
func RunSuite(ctx workflow.Context, in SuiteInput) (SuiteResult, error) {
	res := SuiteResult{Name: in.Name}
	if len(in.Entries) == 0 {
		return res, temporal.NewNonRetryableApplicationError("suite "+in.Name+" has no experiments", "BadConfig", nil)
	}
	suiteID := workflow.GetInfo(ctx).WorkflowExecution.ID
	progress := SuiteProgress{Total: len(in.Entries)}
	if err := workflow.SetQueryHandler(ctx, SuiteProgressQuery, func() (SuiteProgress, error) {
		return progress, nil
	}); err != nil {
		return res, err
	}
	// Attempts, cool-downs and StopOnFailure add commands (timers, more
	// children) only when a suite sets them, so the histories of suites
	// that do not replay as before.
	for i, e := range in.Entries {
		var r SuiteEntryResult
		for attempt := 1; ; attempt++ {
			id := SuiteChildID(suiteID, i+1, e.Keyword)
			if attempt > 1 {
				id = SuiteChildID(suiteID, i+1, fmt.Sprintf("%s-attempt%d", e.Keyword, attempt))
			}
			r = runSuiteEntry(ctx, &progress, i, e, id)
			r.Attempts = attempt
			if r.Status == SuiteSucceeded || attempt >= max(e.MaxAttempts, 1) || ctx.Err() != nil {
				break
			}
			if err := sleepSeconds(ctx, in.RetryDelaySeconds); err != nil {
				break
			}
		}
		res.Entries = append(res.Entries, r)
		progress.Done = append(progress.Done, r)
		if ctx.Err() != nil { // the suite itself was cancelled
			return res, ctx.Err()
		}
		if r.Status != SuiteSucceeded && in.StopOnFailure {
			break
		}
		if i < len(in.Entries)-1 {
			if err := sleepSeconds(ctx, e.CooldownSeconds); err != nil {
				return res, err
			}
		}
	}
	progress.Current, progress.Keyword, progress.ChildID = 0, "", ""
	return res, nil
}

// runSuiteEntry runs one attempt of entry i as child workflow id.
func runSuiteEntry(ctx workflow.Context, progress *SuiteProgress, i int, e SuiteEntry, id string) SuiteEntryResult {
	began := workflow.Now(ctx)
	progress.Current, progress.Keyword, progress.ChildID, progress.StartedAt = i+1, e.Keyword, id, began
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: id,
		// The child is our experiment: if the suite is terminated the
		// experiment is stopped too.
		WaitForCancellation: true,
	})
	var out ExperimentResult
	err := workflow.ExecuteChildWorkflow(cctx, RunExperiment, e.Input).Get(ctx, &out)
	return SuiteEntryOf(i+1, e.Keyword, id, e.Input, out, err, workflow.Now(ctx).Sub(began).Seconds())
}

// SuiteEntryOf is the suite entry (1-based index, keyword) of the
// experiment run id of in that ended with out and err after seconds: failed
// when the run failed or its exactness check did. It is pure, so a suite
// run from outside a workflow (a comparison suite) records its runs as
// RunSuite does.
func SuiteEntryOf(index int, keyword, id string, in ExperimentInput, out ExperimentResult, err error, seconds float64) SuiteEntryResult {
	r := SuiteEntryResult{
		Index: index, Keyword: keyword, Experiment: in.Name, WorkflowID: id, JobID: JobIDFor(id),
		Seconds:  seconds,
		Protocol: orDefault(in.ReconfigProtocol, ProtocolStopAndRestart), StateBackend: in.StateBackend,
		TotalRuntime: in.TotalRuntimeSeconds,
		Produced:     out.Produced, Lost: out.Lost, Duplicated: out.Duplicated, Reordered: out.Reordered, ExactnessUnchecked: out.ExactnessUnchecked,
		StartedAt: out.StartedAt, MetricsStart: out.MetricsStart, Reconfigs: out.Reconfigs,
	}
	switch {
	case err != nil:
		r.Status, r.Error = SuiteFailed, innermostMessage(err)
	case out.Lost != 0 || out.Duplicated != 0 || out.Reordered != 0:
		r.Status, r.Error = SuiteFailed, fmt.Sprintf("exactness violated: lost=%d duplicated=%d reordered=%d", out.Lost, out.Duplicated, out.Reordered)
	default:
		r.Status = SuiteSucceeded
	}
	return r
}

// sleepSeconds pauses the suite for n seconds (none when n ≤ 0).
func sleepSeconds(ctx workflow.Context, n int) error {
	if n <= 0 {
		return nil
	}
	return workflow.Sleep(ctx, time.Duration(n)*time.Second)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// innermostMessage strips Temporal's wrapping ("child workflow execution
// error (...): activity error (...): cause") down to the cause, keeping the
// outer text only when there is nothing underneath.
func innermostMessage(err error) string {
	msg := err.Error()
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			break
		}
		err = u.Unwrap()
	}
	if inner := err.Error(); inner != "" {
		msg = inner
	}
	return strings.TrimSpace(msg)
}
