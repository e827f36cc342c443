package plan

import (
	"maps"

	"koala/dataplane/control"
)

// Merge folds the deployment one reconfiguration left (next) into the
// job's current one (cur), operator by operator: every operator whose
// routing epoch is higher in next is taken from next (control.MergeNewer),
// the others stay as in cur. Reconfigurations of different operators run
// at the same time each start from an older cur, so neither result is the
// whole truth; merged in any order they give the same deployment.
//
// A task migration's half-done state lives in the job parameter
// ParamPendingMigration+op, which goes with its operator.
func Merge(cur, next control.Deployment) control.Deployment {
	merged, changed := control.MergeNewer(cur, next)
	if len(changed) == 0 || len(cur.Job.Operators) == 0 {
		return merged
	}
	params := maps.Clone(merged.Job.Params)
	for _, op := range changed {
		key := control.ParamPendingMigration + op
		if v, ok := next.Job.Params[key]; ok {
			if params == nil {
				params = map[string]string{}
			}
			params[key] = v
		} else {
			delete(params, key)
		}
	}
	merged.Job.Params = params
	return merged
}
