package experiments

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"koala/dataplane/control"
	"koala/queries"
	"koala/workflows"
)

// CheckQuery checks a parsed config against the queries this binary
// knows: the query exists, every "<Operator>Parallelism" field and every
// reconfiguration's TargetOperator names one of its operators. The
// workflow checks the same (BuildJob, planning), but only after it has
// started; `koala run` calls this first so that such a config fails at
// once, without a stack.
func CheckQuery(in workflows.ExperimentInput) error {
	ops, err := queries.OperatorsFor(in.QueryName, nil, in.Params)
	if err != nil {
		return err
	}
	var names []string
	for _, op := range ops {
		names = append(names, op.Name)
	}
	known := strings.Join(names, ", ")
	var errs []error
	for _, op := range sortedKeys(in.Parallelism) {
		if !slices.Contains(names, op) {
			field := strings.ToUpper(op[:1]) + op[1:] + "Parallelism"
			errs = append(errs, fmt.Errorf("field %q: query %q has no operator %q (operators: %s)", field, in.QueryName, op, known))
		}
	}
	for i, r := range in.Reconfigurations {
		if r.TargetOperator != "" && !slices.Contains(names, r.TargetOperator) {
			errs = append(errs, fmt.Errorf("field \"TargetOperator\" in Reconfigurations[%d]: query %q has no operator %q (operators: %s)", i, in.QueryName, r.TargetOperator, known))
		}
	}
	errs = append(errs, checkTransactionalSinks(in, ops)...)
	return errors.Join(errs...)
}

// checkTransactionalSinks rejects reconfigurations of a Kafka sink that
// writes transactionally (the job takes checkpoints). A sink task holds the
// transaction of the records written since the last checkpoint and commits
// it only when the next checkpoint completes; a rescale or a task move
// stops the old task before that (or fences it with the moved task's
// producer), aborting the transaction, and nothing replays those records,
// so a read_committed consumer would never see them.
func checkTransactionalSinks(in workflows.ExperimentInput, ops []control.OperatorSpec) []error {
	if in.CheckpointIntervalSeconds <= 0 {
		return nil
	}
	var errs []error
	for i, r := range in.Reconfigurations {
		for _, op := range ops {
			if op.Kind != control.KindKafkaSink {
				continue
			}
			field := ""
			switch {
			case r.TargetOperator == op.Name:
				field = "TargetOperator"
			case r.TaskID != "" && strings.HasPrefix(r.TaskID, op.Name+"-"):
				field = "TaskID"
			default:
				continue
			}
			errs = append(errs, fmt.Errorf("field %q in Reconfigurations[%d]: operator %q is a Kafka sink writing transactionally (checkpoints every %d s), "+
				"and reconfiguring it would stop a sink task with its open transaction, losing the records it wrote since the last checkpoint; "+
				"reconfigure another operator, or run without checkpoints (CheckpointIntervalSeconds 0) for an at-least-once sink",
				field, i, op.Name, in.CheckpointIntervalSeconds))
		}
	}
	return errs
}
