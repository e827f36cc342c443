package control

import (
	"reflect"
	"testing"
)

// dep builds a deployment of source → a → b with the given parallelism
// and routing epochs per operator (tasks placed on worker "w").
func dep(epochs, parallelism map[string]int) Deployment {
	d := Deployment{Job: JobSpec{JobID: "j"}, Epoch: 1}
	for _, op := range []string{"source", "a", "b"} {
		p := parallelism[op]
		d.Job.Operators = append(d.Job.Operators, OperatorSpec{Name: op, Parallelism: p})
		for i := 0; i < p; i++ {
			d.Tasks = append(d.Tasks, TaskRef{ID: TaskID(op, i), Operator: op, Index: i, WorkerID: "w"})
		}
		d.Routing = append(d.Routing, RoutingTable{Operator: op, Epoch: int64(epochs[op]), Buckets: make([]int, 4)})
	}
	return d
}

func TestMergeNewer(t *testing.T) {
	base := dep(map[string]int{"source": 1, "a": 1, "b": 1}, map[string]int{"source": 1, "a": 2, "b": 2})
	aScaled := dep(map[string]int{"source": 1, "a": 2, "b": 1}, map[string]int{"source": 1, "a": 4, "b": 2})
	bScaled := dep(map[string]int{"source": 1, "a": 1, "b": 2}, map[string]int{"source": 1, "a": 2, "b": 3})
	both := dep(map[string]int{"source": 1, "a": 2, "b": 2}, map[string]int{"source": 1, "a": 4, "b": 3})
	for _, tc := range []struct {
		name        string
		cur, next   Deployment
		want        Deployment
		wantChanged []string
	}{
		{"newer operator is taken", base, aScaled, aScaled, []string{"a"}},
		{"older or equal changes nothing", aScaled, base, aScaled, nil},
		{"repeated update changes nothing", aScaled, aScaled, aScaled, nil},
		{"concurrent results combine, in either order (1)", aScaled, bScaled, both, []string{"b"}},
		{"concurrent results combine, in either order (2)", bScaled, aScaled, both, []string{"a"}},
		{"empty current takes everything", Deployment{}, base, base, []string{"source", "a", "b"}},
		{"another job is ignored", base, func() Deployment { d := aScaled; d.Job.JobID = "other"; return d }(), base, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := MergeNewer(tc.cur, tc.next)
			if !reflect.DeepEqual(changed, tc.wantChanged) {
				t.Errorf("changed %v, want %v", changed, tc.wantChanged)
			}
			if !reflect.DeepEqual(got.Tasks, tc.want.Tasks) || !reflect.DeepEqual(got.Routing, tc.want.Routing) || !reflect.DeepEqual(got.Job.Operators, tc.want.Job.Operators) {
				t.Errorf("merged deployment\n got  %+v\n want %+v", got, tc.want)
			}
		})
	}
}

func TestMergeNewerDoesNotAlias(t *testing.T) {
	base := dep(map[string]int{"source": 1, "a": 1, "b": 1}, map[string]int{"source": 1, "a": 2, "b": 2})
	next := dep(map[string]int{"source": 1, "a": 2, "b": 1}, map[string]int{"source": 1, "a": 3, "b": 2})
	got, _ := MergeNewer(base, next)
	got.Routing[1].Buckets[0] = 9
	got.Job.Operators[1].Parallelism = 9
	if next.Routing[1].Buckets[0] == 9 || base.Job.Operators[1].Parallelism == 9 {
		t.Fatal("the merged deployment shares memory with its inputs")
	}
}
