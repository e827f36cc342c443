package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"koala/dataplane/control"
	"koala/workflows/plan"
)

// PlanInput asks for the plan of one reconfiguration of one operator.
// Kind selects the planner: scaleup/scaledown (or empty, for inputs
// recorded before kinds existed) use Parallelism, rebalance uses
// BucketLoad, task-migration uses TaskID and TargetWorker.
type PlanInput struct {
	Current      control.Deployment   `json:"current"`
	Operator     string               `json:"operator"`
	Parallelism  int                  `json:"parallelism"`
	Workers      []control.WorkerInfo `json:"workers"`
	Step         StepInfo             `json:"step"`
	Kind         string               `json:"kind,omitempty"`
	BucketLoad   []float64            `json:"bucket_load,omitempty"`
	TaskID       string               `json:"task_id,omitempty"`
	TargetWorker string               `json:"target_worker,omitempty"`
	// MeasureSecs is how long a rebalance without BucketLoad measures the
	// operator's per-bucket input before planning (0: 2 s).
	MeasureSecs float64 `json:"measure_secs,omitempty"`
}

// PlanScale computes the reconfiguration plan of any kind. A rebalance
// without a BucketLoad plans from the load measured on the running tasks
// (measureBucketLoad). The planning
// itself is a pure function of package plan (Scale, Rebalance,
// MigrateTask); running it as an activity puts the plan, with its bucket
// moves, into the workflow history. An invalid request is not retryable
// and its message names the problem.
func (a *Activities) PlanScale(ctx context.Context, in PlanInput) (plan.Plan, error) {
	var p plan.Plan
	err := a.step(ctx, in.Step, func() error {
		if in.Kind == plan.KindRebalance && len(in.BucketLoad) == 0 {
			load, err := a.measureBucketLoad(ctx, in.Current, in.Operator, in.MeasureSecs)
			if err != nil {
				return err
			}
			in.BucketLoad = load
		}
		var err error
		p, err = planFor(in)
		if err != nil {
			return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidReconfiguration", err)
		}
		return nil
	})
	return p, err
}

func planFor(in PlanInput) (plan.Plan, error) {
	p, err := planKind(in)
	if err != nil {
		return p, err
	}
	if err := p.CheckDirections(); err != nil {
		return plan.Plan{}, err
	}
	return p, transactionalSink(in.Current.Job, p.Operator)
}

// transactionalSink refuses to reconfigure a Kafka sink that writes
// transactionally (the job takes checkpoints): each sink task commits the
// records it wrote since the last checkpoint only when the next one
// completes, and a task the reconfiguration stops or moves would abort
// that transaction with nothing to replay its records. (`koala run`
// rejects such configs before starting; this catches other starts.)
func transactionalSink(job control.JobSpec, op string) error {
	if job.Params[control.ParamCheckpointStore] == "" {
		return nil
	}
	for _, spec := range job.Operators {
		if spec.Name == op && spec.Kind == control.KindKafkaSink {
			return fmt.Errorf("operator %q is a Kafka sink writing transactionally (the job takes checkpoints): reconfiguring it would stop a sink task with its open transaction, losing the records it wrote since the last checkpoint", op)
		}
	}
	return nil
}

func planKind(in PlanInput) (plan.Plan, error) {
	switch in.Kind {
	case "", plan.KindScaleUp, plan.KindScaleDown:
		return plan.Scale(in.Current, in.Operator, in.Parallelism, in.Workers)
	case plan.KindRebalance:
		if len(in.BucketLoad) == 0 {
			return plan.Plan{}, fmt.Errorf("rebalance of operator %q: no per-bucket load given (BucketLoad is empty)", in.Operator)
		}
		return plan.Rebalance(in.Current, in.Operator, in.BucketLoad, in.Workers)
	case plan.KindTaskMigration:
		if in.TaskID == "" || in.TargetWorker == "" {
			return plan.Plan{}, fmt.Errorf("task-migration needs TaskID and TargetWorker (got %q, %q)", in.TaskID, in.TargetWorker)
		}
		p, err := plan.MigrateTask(in.Current, in.TaskID, in.TargetWorker, in.Workers)
		if err == nil && in.Operator != "" && p.Operator != in.Operator {
			return plan.Plan{}, fmt.Errorf("task-migration: task %q belongs to operator %q, not TargetOperator %q", in.TaskID, p.Operator, in.Operator)
		}
		return p, err
	}
	return plan.Plan{}, fmt.Errorf("reconfiguration type %q is unknown (known: %s, %s, %s, %s)", in.Kind, plan.KindScaleUp, plan.KindScaleDown, plan.KindRebalance, plan.KindTaskMigration)
}
