package plan

import (
	"reflect"
	"testing"

	"koala/dataplane/control"
)

// Two reconfigurations of different operators planned from the same
// deployment merge into one valid deployment with both changes, in either
// order; a half-done task migration's parameter goes with its operator.
func TestMergeConcurrentResults(t *testing.T) {
	job := helloJob(64, 2)
	job.Operators = append(job.Operators[:2:2],
		control.OperatorSpec{Name: "second", Kind: "map-upper", Parallelism: 2, Inputs: []string{"mapper"}, Keyed: true, Stateful: true},
		control.OperatorSpec{Name: "sink", Kind: "count-sink", Parallelism: 1, Inputs: []string{"second"}})
	ws := workers("w1", "w2", "w3")
	base := mustInitial(t, job, ws)

	scaled, err := Scale(base, "mapper", 4, ws)
	if err != nil {
		t.Fatal(err)
	}
	evacuated, err := MigrateTask(base, "second-0", "w3", ws)
	if err != nil {
		t.Fatal(err)
	}
	ab := Merge(Merge(base, scaled.New), evacuated.New)
	ba := Merge(Merge(base, evacuated.New), scaled.New)
	for name, d := range map[string]control.Deployment{"scale first": ab, "migration first": ba} {
		if err := Validate(d); err != nil {
			t.Fatalf("%s: merged deployment invalid: %v", name, err)
		}
		if got := len(d.TasksOf("mapper")); got != 4 {
			t.Errorf("%s: %d mapper tasks, want 4", name, got)
		}
		if got := len(d.TasksOf("second")); got != 1 {
			t.Errorf("%s: %d second tasks after the evacuate step, want 1", name, got)
		}
		if _, pending, err := Pending(d, "second"); err != nil || !pending {
			t.Errorf("%s: the pending migration of second is lost (pending %v, err %v)", name, pending, err)
		}
	}
	if !reflect.DeepEqual(ab.Tasks, ba.Tasks) || !reflect.DeepEqual(ab.Routing, ba.Routing) || !reflect.DeepEqual(ab.Job.Params, ba.Job.Params) {
		t.Error("the merge depends on the order the results arrive in")
	}

	// The place step completes the migration and clears the parameter.
	placed, err := MigrateTask(ab, "second-0", "w3", ws)
	if err != nil {
		t.Fatal(err)
	}
	done := Merge(ab, placed.New)
	if _, pending, _ := Pending(done, "second"); pending {
		t.Error("the finished migration is still pending after the merge")
	}
	if got := len(done.TasksOf("mapper")); got != 4 {
		t.Errorf("the place step undid the scale-out of mapper: %d tasks", got)
	}
}
