package experiments

import (
	"errors"
	"fmt"
	"slices"
	"strings"

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
	return errors.Join(errs...)
}
