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
}

// SuiteInput is the input of RunSuite: the suite's name and its experiments,
// run in this order.
type SuiteInput struct {
	Name    string       `json:"name"`
	Entries []SuiteEntry `json:"entries"`
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
	for i, e := range in.Entries {
		id := SuiteChildID(suiteID, i+1, e.Keyword)
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
		r := SuiteEntryResult{
			Index: i + 1, Keyword: e.Keyword, Experiment: e.Input.Name, WorkflowID: id, JobID: JobIDFor(id),
			Seconds:  workflow.Now(ctx).Sub(began).Seconds(),
			Protocol: orDefault(e.Input.ReconfigProtocol, ProtocolStopAndRestart), StateBackend: e.Input.StateBackend,
			TotalRuntime: e.Input.TotalRuntimeSeconds,
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
		res.Entries = append(res.Entries, r)
		progress.Done = append(progress.Done, r)
		if ctx.Err() != nil { // the suite itself was cancelled
			return res, ctx.Err()
		}
	}
	progress.Current, progress.Keyword, progress.ChildID = 0, "", ""
	return res, nil
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
