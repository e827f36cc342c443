package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/mocks"

	"koala/workflows"
)

func TestReconfigureFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   reconfigureFlags
		want    workflows.ReconfigSpec
		wantErr string
	}{
		{"scale", reconfigureFlags{job: "j", operator: "counter", parallelism: 4, task: -1},
			workflows.ReconfigSpec{TargetOperator: "counter", TargetParallelism: 4}, ""},
		{"task migration", reconfigureFlags{job: "j", operator: "counter", kind: "task-migration", task: 1, worker: "w2"},
			workflows.ReconfigSpec{Type: "task-migration", TargetOperator: "counter", TaskID: "counter-1", TargetWorker: "w2"}, ""},
		{"no job", reconfigureFlags{operator: "counter", parallelism: 2, task: -1}, workflows.ReconfigSpec{}, "--job is required"},
		{"no operator", reconfigureFlags{job: "j", parallelism: 2, task: -1}, workflows.ReconfigSpec{}, "--operator is required"},
		{"parallelism 0", reconfigureFlags{job: "j", operator: "counter", task: -1}, workflows.ReconfigSpec{}, "--parallelism 0: must be ≥ 1"},
		{"unknown type", reconfigureFlags{job: "j", operator: "counter", kind: "shuffle", task: -1}, workflows.ReconfigSpec{}, `--type "shuffle" is unknown`},
		{"migration without worker", reconfigureFlags{job: "j", operator: "counter", kind: "task-migration", task: 1}, workflows.ReconfigSpec{}, "needs --task INDEX and --worker ID"},
		{"bad bucket load", reconfigureFlags{job: "j", operator: "counter", kind: "rebalance", bucketLoad: "1,x", task: -1}, workflows.ReconfigSpec{}, `--bucket-load value 1 "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.flags.spec()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.TargetOperator != tc.want.TargetOperator || got.TargetParallelism != tc.want.TargetParallelism ||
				got.Type != tc.want.Type || got.TaskID != tc.want.TaskID || got.TargetWorker != tc.want.TargetWorker {
				t.Fatalf("spec %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A job that does not exist gives a one-line error, and no update is sent.
func TestReconfigureUnknownJob(t *testing.T) {
	tc := &mocks.Client{}
	tc.On("DescribeWorkflowExecution", mock.Anything, "nope", "").Return(nil, serviceerror.NewNotFound("workflow not found for ID: nope"))
	var out bytes.Buffer
	err := sendReconfigure(context.Background(), tc, "nope", workflows.ReconfigSpec{TargetOperator: "counter", TargetParallelism: 2}, &out)
	if err == nil || err.Error() != "job nope not found" {
		t.Fatalf("error %v, want \"job nope not found\"", err)
	}
	tc.AssertNotCalled(t, "UpdateWorkflow", mock.Anything, mock.Anything)
}

// A job that has ended is reported as not running.
func TestReconfigureEndedJob(t *testing.T) {
	tc := &mocks.Client{}
	tc.On("DescribeWorkflowExecution", mock.Anything, "done", "").Return(&workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflow.WorkflowExecutionInfo{Status: enums.WORKFLOW_EXECUTION_STATUS_COMPLETED},
	}, nil)
	err := sendReconfigure(context.Background(), tc, "done", workflows.ReconfigSpec{TargetOperator: "counter", TargetParallelism: 2}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "job done is not running (status Completed)") {
		t.Fatalf("error %v, want it to say the job is not running", err)
	}
}
