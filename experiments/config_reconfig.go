package experiments

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"koala/workflows"
	"koala/workflows/plan"
)

// reconfigFields are the canonical names inside a Reconfigurations entry;
// "TargetParallelism" is accepted as an alias of the artifact's spelling.
// Which of them an entry needs depends on its type (see requiredFields).
var reconfigFields = []string{"TriggerTimeSeconds", "Type", "TargetOperator", "TargetParrallelism", "BucketLoad", "TaskID", "TargetWorker"}

// requiredFields and allowedFields per kind. A rebalance without
// "BucketLoad" plans from the per-bucket load measured on the running
// tasks when it fires; a task-migration's operator follows from its
// "TaskID", and a "TaskID" or "TargetWorker" left out is chosen when it
// runs (plan.ChooseMigration), so it needs "TargetOperator" or "TaskID".
var (
	requiredFields = map[string][]string{plan.KindScaleUp: {"TriggerTimeSeconds", "Type", "TargetOperator", "TargetParrallelism"}, plan.KindScaleDown: {"TriggerTimeSeconds", "Type", "TargetOperator", "TargetParrallelism"}, plan.KindRebalance: {"TriggerTimeSeconds", "Type", "TargetOperator"}, plan.KindTaskMigration: {"TriggerTimeSeconds", "Type"}}
	allowedFields  = map[string][]string{plan.KindScaleUp: {"TriggerTimeSeconds", "Type", "TargetOperator", "TargetParrallelism", targetAlias}, plan.KindScaleDown: {"TriggerTimeSeconds", "Type", "TargetOperator", "TargetParrallelism", targetAlias}, plan.KindRebalance: {"TriggerTimeSeconds", "Type", "TargetOperator", "BucketLoad"}, plan.KindTaskMigration: {"TriggerTimeSeconds", "Type", "TargetOperator", "TaskID", "TargetWorker"}}
)

const targetAlias = "TargetParallelism"

// Operator names may hold hyphens ("Q4-closeParallelism" sets "q4-close").
var parallelismField = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*Parallelism$`)

// reconfigTypes maps accepted "Type" values to koala's kinds; "" marks
// kinds that are recognised but not supported yet.
var reconfigTypes = map[string]string{
	"scaleup":        plan.KindScaleUp,
	"scale-up":       plan.KindScaleUp,
	"scale-out":      plan.KindScaleUp,
	"scaleout":       plan.KindScaleUp,
	"scaledown":      plan.KindScaleDown,
	"scale-down":     plan.KindScaleDown,
	"scale-in":       plan.KindScaleDown,
	"scalein":        plan.KindScaleDown,
	"rebalance":      plan.KindRebalance,
	"task-migration": plan.KindTaskMigration,
}

// supportedTypes lists the accepted "Type" values that are implemented.
func supportedTypes() []string {
	var out []string
	for _, t := range sortedKeys(reconfigTypes) {
		if reconfigTypes[t] != "" {
			out = append(out, t)
		}
	}
	return out
}

// checkDirections follows each operator's parallelism through the
// reconfigurations (sorted by time) when its initial parallelism is known,
// and rejects a scale-up that does not increase it or a scale-down that does
// not decrease it.
func (p *parser) checkDirections(reconfigs []workflows.ReconfigSpec, initial map[string]int) {
	cur := maps.Clone(initial)
	for _, r := range reconfigs {
		was, ok := cur[r.TargetOperator]
		if !ok || r.TargetParallelism < 1 || r.Type == "" {
			continue
		}
		switch {
		case r.Type == plan.KindScaleUp && r.TargetParallelism <= was:
			p.errorf("reconfiguration at %d s: %q of operator %q to parallelism %d does not increase it (it is %d then)", r.TriggerTimeSeconds, r.Type, r.TargetOperator, r.TargetParallelism, was)
		case r.Type == plan.KindScaleDown && r.TargetParallelism >= was:
			p.errorf("reconfiguration at %d s: %q of operator %q to parallelism %d does not decrease it (it is %d then)", r.TriggerTimeSeconds, r.Type, r.TargetOperator, r.TargetParallelism, was)
		}
		cur[r.TargetOperator] = r.TargetParallelism
	}
}

// clearKeptParallelism checks that an artifact rebalance's or task
// migration's restated parallelism is the operator's at that time, and
// clears it: both keep the parallelism, and the workflow takes none for
// them.
func (p *parser) clearKeptParallelism(reconfigs []workflows.ReconfigSpec, initial map[string]int) {
	cur := maps.Clone(initial)
	for i := range reconfigs {
		r := &reconfigs[i]
		was, known := cur[r.TargetOperator]
		switch {
		case r.Type != plan.KindRebalance && r.Type != plan.KindTaskMigration:
			if r.TargetParallelism > 0 {
				cur[r.TargetOperator] = r.TargetParallelism
			}
			continue
		case r.TargetParallelism == 0:
			continue
		case known && r.TargetParallelism != was:
			p.errorf("reconfiguration at %d s: %s of operator %q keeps its parallelism, which is %d then; TargetParrallelism %d differs (allowed: %d, or leave it out)", r.TriggerTimeSeconds, r.Type, r.TargetOperator, was, r.TargetParallelism, was)
		}
		r.TargetParallelism = 0
	}
}

// missingMigrationFields names the fields of a task migration that are
// chosen when it runs.
func missingMigrationFields(seen map[string]bool) string {
	switch {
	case !seen["TaskID"] && !seen["TargetWorker"]:
		return "no \"TaskID\" and no \"TargetWorker\""
	case !seen["TaskID"]:
		return "no \"TaskID\""
	}
	return "no \"TargetWorker\""
}

// entryMeta says where a parsed Reconfigurations entry came from.
type entryMeta struct {
	index  int    // position in the config's array
	target string // spelling of its target parallelism field
}

// reconfigurations parses the "Reconfigurations" array. Entries that are
// not objects are skipped (after reporting them); meta[i] describes out[i].
func (p *parser) reconfigurations(raw json.RawMessage) (out []workflows.ReconfigSpec, meta []entryMeta) {
	at := where("Reconfigurations", "")
	if k := kindOf(raw); k != "array" {
		p.errorf("%s: expected an array of objects, got %s", at, k)
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.errorf("%s: %v", at, err)
		return nil, nil
	}
	out = make([]workflows.ReconfigSpec, 0, len(items))
	for i, item := range items {
		loc := fmt.Sprintf("Reconfigurations[%d]", i)
		if k := kindOf(item); k != "object" {
			p.errorf("%s: expected an object, got %s", loc, k)
			continue
		}
		members, err := objectMembers(item)
		if err != nil {
			p.errorf("%s: %v", loc, err)
			continue
		}
		slices.SortStableFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
		var r workflows.ReconfigSpec
		seen := map[string]bool{}
		for _, m := range members {
			at := where(m.name, loc)
			if seen[m.name] {
				p.errorf("%s appears more than once", at)
				continue
			}
			seen[m.name] = true
			switch m.name {
			case "TriggerTimeSeconds":
				p.intTo(&r.TriggerTimeSeconds, m.raw, at, 0, math.MaxInt32)
			case "Type":
				typ, ok := p.str(m.raw, at)
				if !ok {
					break
				}
				kind, known := reconfigTypes[typ]
				switch {
				case !known:
					p.errorf("%s: unknown type %q (allowed: %s)", at, typ, strings.Join(supportedTypes(), ", "))
				default:
					r.Type = kind
				}
			case "TargetOperator":
				r.TargetOperator, _ = p.str(m.raw, at)
			case "TargetParrallelism", targetAlias:
				p.intTo(&r.TargetParallelism, m.raw, at, 1, math.MaxInt32)
			case "TaskID":
				r.TaskID, _ = p.str(m.raw, at)
			case "TargetWorker":
				r.TargetWorker, _ = p.str(m.raw, at)
			case "BucketLoad":
				if err := json.Unmarshal(m.raw, &r.BucketLoad); err != nil || len(r.BucketLoad) == 0 {
					p.errorf("%s: expected a non-empty array of numbers ≥ 0 (one per bucket), got %s", at, compact(m.raw))
					r.BucketLoad = nil
					break
				}
				for b, l := range r.BucketLoad {
					if l < 0 {
						p.errorf("%s: entry %d is %v, loads must be ≥ 0", at, b, l)
					}
				}
			default:
				p.errorf("unknown field %q in %s%s", m.name, loc, suggest(m.name, reconfigFields))
			}
		}
		if seen["TargetParrallelism"] && seen[targetAlias] {
			p.errorf("%s: both \"TargetParrallelism\" and %q are given; use one", loc, targetAlias)
		}
		required, allowed := requiredFields[r.Type], allowedFields[r.Type]
		if r.Type == plan.KindTaskMigration {
			switch {
			case !seen["TargetOperator"] && !seen["TaskID"]:
				p.errorf("%s: a task-migration needs \"TargetOperator\" (its task and worker are then chosen when it runs) or \"TaskID\" (\"<operator>-<index>\")", loc)
			case !seen["TaskID"] || !seen["TargetWorker"]:
				// The artifact's task migration (its task_migration
				// branch) restates the operator's parallelism and moves
				// the task of one hard-wired worker to a free one.
				p.notef("%s: %s; chosen when it runs: of the operator's tasks, one on the worker holding the most tasks moves to the worker holding the fewest (the artifact moves the task of its worker 9 to a free worker)", loc, missingMigrationFields(seen))
			}
		}
		if p.artifact && (r.Type == plan.KindTaskMigration || r.Type == plan.KindRebalance) {
			// The artifact's rebalance and task migration restate the
			// operator's parallelism (clearKeptParallelism checks it
			// is unchanged).
			allowed = append(slices.Clone(allowed), "TargetParrallelism", targetAlias)
		}
		if r.Type == "" { // bad or missing type, reported above
			required, allowed = []string{"TriggerTimeSeconds", "Type"}, append(slices.Clone(reconfigFields), targetAlias)
		}
		for _, f := range required {
			if !seen[f] && !(f == "TargetParrallelism" && seen[targetAlias]) {
				p.errorf("%s: missing required field %q", loc, f)
			}
		}
		for _, m := range members {
			if slices.Contains(reconfigFields, m.name) || m.name == targetAlias {
				if !slices.Contains(allowed, m.name) {
					p.errorf("%s: field %q does not apply to type %q (fields of that type: %s)", loc, m.name, r.Type, strings.Join(allowed, ", "))
				}
			}
		}
		name := "TargetParrallelism"
		if seen[targetAlias] && !seen[name] {
			name = targetAlias
		}
		out = append(out, r)
		meta = append(meta, entryMeta{index: i, target: name})
	}
	return out, meta
}
