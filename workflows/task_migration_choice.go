package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/dataplane/control"
	"koala/workflows/plan"
)

// Task migrations that name no task or no worker.
//
// The artifact's task migration names only its operator (see
// plan.ChooseMigration). Such a spec — from a config or a "reconfigure"
// update — is completed when each of its two steps starts, from the
// deployment as it stands then: the first step chooses the task and the
// worker, the second takes the migration the first left pending. The
// choice is pure and deterministic, so it runs in workflow code; the
// version marker guards it because before it validateInput and the update
// validator rejected such specs, so no recorded run reaches it without the
// marker.
const versionChooseMigration = "choose-task-migration"

// needsChoice reports whether spec is a task migration that leaves its
// task or its worker out.
func needsChoice(spec ReconfigSpec) bool {
	return spec.Type == plan.KindTaskMigration && (spec.TaskID == "" || spec.TargetWorker == "")
}

// completeMigration returns spec with the task and worker a task migration
// leaves out chosen on dep; other specs are returned as they are.
func completeMigration(ctx workflow.Context, spec ReconfigSpec, dep control.Deployment, workers []control.WorkerInfo) (ReconfigSpec, error) {
	if !needsChoice(spec) {
		return spec, nil
	}
	if workflow.GetVersion(ctx, versionChooseMigration, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return spec, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("task-migration of operator %q needs TaskID and TargetWorker", spec.TargetOperator), "InvalidReconfiguration", nil)
	}
	c, err := plan.ChooseMigration(dep, spec.TargetOperator, spec.TaskID, spec.TargetWorker, workers)
	if err != nil {
		return spec, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("task-migration of operator %q: %v", spec.TargetOperator, err), "InvalidReconfiguration", err)
	}
	workflow.GetLogger(ctx).Info("task migration chosen", "operator", c.Operator, "choice", c.String())
	spec.TargetOperator, spec.TaskID, spec.TargetWorker = c.Operator, c.TaskID, c.To
	return spec, nil
}

// migrationSummary is the one line the Temporal UI shows for a task
// migration step (its reconfiguration workflow and plan step): which task
// moves where. "" for other kinds, or a spec that does not fit dep (the
// plan step reports why).
func migrationSummary(spec ReconfigSpec, dep control.Deployment, workers []control.WorkerInfo) string {
	if spec.Type != plan.KindTaskMigration {
		return ""
	}
	c, err := plan.ChooseMigration(dep, spec.TargetOperator, spec.TaskID, spec.TargetWorker, workers)
	if err != nil {
		return ""
	}
	return "task-migration of " + c.Operator + ": " + c.String()
}
