package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"koala/workflows/autoscale"
)

// QueryJobState is RunExperiment's query for the job as it runs now
// (autoscale.JobState): whether it takes reconfigurations, its operators
// with their current parallelism, the reconfigurations running and when
// the last one ended. The Autoscale workflow reads it every tick.
//
// A query adds nothing to the history, so runs recorded before it replay
// unchanged; a run recorded before it does not answer it.
const QueryJobState = "job-state"

// registerJobStateQuery installs the query handler on RunExperiment.
func (s *reconfigScheduler) registerJobStateQuery(ctx workflow.Context) error {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	return workflow.SetQueryHandler(ctx, QueryJobState, func() (autoscale.JobState, error) {
		return s.jobState(id), nil
	})
}

// jobState is the answer to QueryJobState.
func (s *reconfigScheduler) jobState(workflowID string) autoscale.JobState {
	st := autoscale.JobState{
		JobID: s.jobID, WorkflowID: workflowID, Protocol: protocolName(s.in.ReconfigProtocol), PerOperator: s.perOp,
		NumBuckets: s.in.NumBuckets, Partitions: s.in.Partitions, Status: autoscale.StatusRunning,
	}
	switch {
	case s.err != nil:
		st.Status, st.Detail = autoscale.StatusEnded, fmt.Sprintf("a reconfiguration failed: %v", s.err)
	case s.closed:
		st.Status, st.Detail = autoscale.StatusEnded, fmt.Sprintf("its input ended (TotalRuntimeSeconds=%d)", s.in.TotalRuntimeSeconds)
	case !s.live:
		st.Status, st.Detail = autoscale.StatusDeploying, "its tasks are being deployed"
		return st
	}
	job := s.dep.Job
	st.NumBuckets, st.Partitions = job.NumBuckets, job.Partitions
	for _, op := range job.Operators {
		st.Operators = append(st.Operators, autoscale.Operator{
			Name: op.Name, Kind: op.Kind, Parallelism: op.Parallelism, Inputs: op.Inputs,
			Source: strings.HasSuffix(op.Kind, "source"), Sink: strings.HasSuffix(op.Kind, "sink"),
		})
	}
	for _, o := range s.outcomes { // launch order; a slice, so the answer is stable
		if _, done := s.done[o.ID]; !done {
			st.Reconfiguring = append(st.Reconfiguring, autoscale.Running{Operator: o.Spec.TargetOperator, WorkflowID: o.WorkflowID})
			continue
		}
		if end := s.start.Add(time.Duration(o.EndSec * float64(time.Second))); end.After(st.LastReconfigEnd) {
			st.LastReconfigEnd = end
		}
	}
	return st
}
