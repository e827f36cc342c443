package runner

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

// A job that does not exist gives a one-line error, and no update is sent.
func TestReconfigureUnknownJob(t *testing.T) {
	tc := &mocks.Client{}
	tc.On("DescribeWorkflowExecution", mock.Anything, "nope", "").Return(nil, serviceerror.NewNotFound("workflow not found for ID: nope"))
	var out bytes.Buffer
	err := Reconfigure(context.Background(), tc, "nope", workflows.ReconfigSpec{TargetOperator: "counter", TargetParallelism: 2}, &out)
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
	err := Reconfigure(context.Background(), tc, "done", workflows.ReconfigSpec{TargetOperator: "counter", TargetParallelism: 2}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "job done is not running (status Completed)") {
		t.Fatalf("error %v, want it to say the job is not running", err)
	}
}
