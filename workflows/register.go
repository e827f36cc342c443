package workflows

import "go.temporal.io/sdk/worker"

// Register adds every workflow of this package to a Temporal worker.
func Register(w worker.WorkflowRegistry) {
	w.RegisterWorkflow(RunExperiment)
	w.RegisterWorkflow(ReconfigureStopAndRestart)
	w.RegisterWorkflow(ReconfigureLazy)
	w.RegisterWorkflow(ReconfigureDRRS)
	w.RegisterWorkflow(RunSuite)
	w.RegisterWorkflow(CheckpointJob)
	w.RegisterWorkflow(RecoverJob)
	w.RegisterWorkflow(Autoscale)
}
