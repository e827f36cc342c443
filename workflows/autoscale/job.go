package autoscale

import "time"

// Job statuses (JobState.Status).
const (
	// StatusDeploying: the job's tasks are being deployed; it takes no
	// reconfiguration yet.
	StatusDeploying = "deploying"
	// StatusRunning: the job takes reconfigurations.
	StatusRunning = "running"
	// StatusEnded: its input ended, a reconfiguration failed, or its
	// workflow is closed; it takes no more reconfigurations.
	StatusEnded = "ended"
)

// JobState is what the autoscaler knows about a running job: RunExperiment
// answers it to the "job-state" query (workflows.QueryJobState).
type JobState struct {
	JobID string `json:"job_id"`
	// WorkflowID of the RunExperiment the job belongs to.
	WorkflowID string `json:"workflow_id"`
	Status     string `json:"status"`
	// Detail says why the job is not running, when it is not.
	Detail     string     `json:"detail,omitempty"`
	Protocol   string     `json:"protocol"`
	NumBuckets int        `json:"num_buckets"`
	Partitions int        `json:"partitions"`
	Operators  []Operator `json:"operators"`
	// Reconfiguring lists the reconfigurations running now.
	Reconfiguring []Running `json:"reconfiguring,omitempty"`
	// LastReconfigEnd is when the latest completed reconfiguration of the
	// job ended (zero: none did).
	LastReconfigEnd time.Time `json:"last_reconfig_end,omitempty"`
	// PerOperator: reconfigurations of different operators may run at the
	// same time (lazy, DRRS); else they run one at a time.
	PerOperator bool `json:"per_operator"`
}

// Operator is one operator of a job as it runs now.
type Operator struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Parallelism int      `json:"parallelism"`
	Inputs      []string `json:"inputs,omitempty"`
	Source      bool     `json:"source,omitempty"`
	Sink        bool     `json:"sink,omitempty"`
}

// Running is a reconfiguration in progress.
type Running struct {
	Operator   string `json:"operator"`
	WorkflowID string `json:"workflow_id"`
}

// Operator returns the named operator.
func (j JobState) Operator(name string) (Operator, bool) {
	for _, op := range j.Operators {
		if op.Name == name {
			return op, true
		}
	}
	return Operator{}, false
}

// OperatorNames lists the operators in job order.
func (j JobState) OperatorNames() []string {
	out := make([]string, 0, len(j.Operators))
	for _, op := range j.Operators {
		out = append(out, op.Name)
	}
	return out
}

// MaxParallelism is the most tasks op may have under p: NumBuckets,
// p.MaxParallelism when set, and a source's partitions.
func (j JobState) MaxParallelism(p Policy, op Operator) (limit int, by string) {
	limit, by = j.NumBuckets, "NumBuckets"
	if p.MaxParallelism > 0 && p.MaxParallelism < limit {
		limit, by = p.MaxParallelism, "MaxParallelism"
	}
	if op.Source && j.Partitions > 0 && j.Partitions < limit {
		limit, by = j.Partitions, "partitions"
	}
	return max(limit, 1), by
}
