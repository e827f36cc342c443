package activities

import (
	"context"

	"go.temporal.io/sdk/temporal"

	"koala/dataplane/control"
	"koala/workflows/plan"
)

// PlanInput asks for a new deployment of one operator at a new parallelism.
type PlanInput struct {
	Current     control.Deployment   `json:"current"`
	Operator    string               `json:"operator"`
	Parallelism int                  `json:"parallelism"`
	Workers     []control.WorkerInfo `json:"workers"`
	Step        StepInfo             `json:"step"`
}

// PlanScale computes the reconfiguration plan. The planning itself is the
// pure function plan.Scale; running it as an activity puts the plan, with
// its bucket moves, into the workflow history. An invalid request is not
// retryable and its message names the problem.
func (a *Activities) PlanScale(ctx context.Context, in PlanInput) (plan.Plan, error) {
	var p plan.Plan
	err := a.step(ctx, in.Step, func() error {
		var err error
		p, err = plan.Scale(in.Current, in.Operator, in.Parallelism, in.Workers)
		if err != nil {
			return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidReconfiguration", err)
		}
		return nil
	})
	return p, err
}
