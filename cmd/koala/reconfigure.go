package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"koala/dataplane/control"
	"koala/experiments/runner"
	"koala/workflows"
	"koala/workflows/plan"
)

// reconfigureFlags are the flags of `koala reconfigure`.
type reconfigureFlags struct {
	job, operator, kind, worker, bucketLoad string
	parallelism, task, at                   int
}

func init() {
	var temporalAddr, namespace string
	var f reconfigureFlags
	cmd := &cobra.Command{
		Use:   "reconfigure --job WORKFLOW_ID --operator OP --parallelism N",
		Short: "Reconfigure one operator of a running experiment (the workflow's \"reconfigure\" update)",
		Long: "Sends the \"reconfigure\" update to a running RunExperiment workflow and waits until the\n" +
			"reconfiguration completed. The workflow rejects a request for an operator that is still being\n" +
			"reconfigured, an unknown operator or worker, and a parallelism outside 1..NumBuckets.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := f.spec()
			if err != nil {
				return err
			}
			tc, err := dialTemporal(cmd.Context(), temporalAddr, namespace)
			if err != nil {
				return err
			}
			defer tc.Close()
			return runner.Reconfigure(cmd.Context(), tc, f.job, spec, os.Stdout)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	fl.StringVar(&namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	fl.StringVar(&f.job, "job", "", "workflow id of the running experiment (as printed by `koala run`)")
	fl.StringVar(&f.operator, "operator", "", "operator to reconfigure")
	fl.IntVar(&f.parallelism, "parallelism", 0, "target parallelism (scaleup, scaledown)")
	fl.StringVar(&f.kind, "type", "", "scaleup, scaledown, rebalance or task-migration (default: scale to --parallelism)")
	fl.IntVar(&f.task, "task", -1, "task index to move (task-migration; default: a task on the worker holding the most tasks)")
	fl.StringVar(&f.worker, "worker", "", "worker to move the task to (task-migration; default: the worker holding the fewest tasks)")
	fl.StringVar(&f.bucketLoad, "bucket-load", "", "comma-separated load per bucket, NumBuckets values (rebalance)")
	fl.IntVar(&f.at, "at", 0, "second of the run to start at (default: now)")
	rootCmd.AddCommand(cmd)
}

// spec checks the flags and builds the update's argument.
func (f reconfigureFlags) spec() (workflows.ReconfigSpec, error) {
	if f.job == "" {
		return workflows.ReconfigSpec{}, errors.New("--job is required: the workflow id of a running experiment")
	}
	if f.operator == "" {
		return workflows.ReconfigSpec{}, errors.New("--operator is required")
	}
	spec := workflows.ReconfigSpec{TriggerTimeSeconds: f.at, Type: f.kind, TargetOperator: f.operator, TargetParallelism: f.parallelism}
	switch f.kind {
	case "", plan.KindScaleUp, plan.KindScaleDown:
		if f.parallelism < 1 {
			return spec, fmt.Errorf("--parallelism %d: must be ≥ 1 for a scale-up or scale-down", f.parallelism)
		}
	case plan.KindRebalance:
		if f.bucketLoad == "" {
			return spec, errors.New("--type rebalance needs --bucket-load (one value per bucket)")
		}
		for i, s := range strings.Split(f.bucketLoad, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || v < 0 {
				return spec, fmt.Errorf("--bucket-load value %d %q: must be a number ≥ 0", i, s)
			}
			spec.BucketLoad = append(spec.BucketLoad, v)
		}
	case plan.KindTaskMigration:
		// Left out, the workflow chooses them: a task on the worker
		// holding the most tasks, the worker holding the fewest.
		if f.task < -1 {
			return spec, fmt.Errorf("--task %d: must be a task index ≥ 0 (or left out to let the workflow choose)", f.task)
		}
		if f.task >= 0 {
			spec.TaskID = control.TaskID(f.operator, f.task)
		}
		spec.TargetWorker = f.worker
	default:
		return spec, fmt.Errorf("--type %q is unknown (allowed: %s, %s, %s, %s)", f.kind, plan.KindScaleUp, plan.KindScaleDown, plan.KindRebalance, plan.KindTaskMigration)
	}
	if f.at < 0 {
		return spec, fmt.Errorf("--at %d: must be ≥ 0", f.at)
	}
	return spec, nil
}
