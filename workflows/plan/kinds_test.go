package plan

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"koala/dataplane/control"
)

// checkExecutable checks what the protocols rely on: a valid new
// deployment, epochs +1, Moves equal to the diff of the routing tables,
// MovesByPair grouping Moves, added/removed tasks matching the task lists,
// and DRRS subscales that step from Old to New.
func checkExecutable(t *testing.T, old control.Deployment, pl Plan) {
	t.Helper()
	if err := Validate(pl.New); err != nil {
		t.Fatalf("new deployment invalid: %v", err)
	}
	if !reflect.DeepEqual(pl.Old, old) {
		t.Fatal("Plan.Old differs from the input deployment")
	}
	if pl.New.Epoch != old.Epoch+1 {
		t.Errorf("deployment epoch %d → %d, want +1", old.Epoch, pl.New.Epoch)
	}
	ot, _ := old.Table(pl.Operator)
	nt, _ := pl.New.Table(pl.Operator)
	if nt.Epoch != ot.Epoch+1 {
		t.Errorf("routing epoch %d → %d, want +1", ot.Epoch, nt.Epoch)
	}
	var want []BucketMove
	for b := range ot.Buckets {
		if ot.Buckets[b] != nt.Buckets[b] {
			want = append(want, BucketMove{Bucket: b, From: control.TaskID(pl.Operator, ot.Buckets[b]), To: control.TaskID(pl.Operator, nt.Buckets[b])})
		}
	}
	if !reflect.DeepEqual(pl.Moves, want) {
		t.Fatalf("Moves %v, want the table diff %v", pl.Moves, want)
	}
	n := 0
	for _, pm := range pl.MovesByPair {
		for _, b := range pm.Buckets {
			if !slices.Contains(want, BucketMove{Bucket: b, From: pm.From, To: pm.To}) {
				t.Fatalf("pair %s→%s bucket %d is not a move", pm.From, pm.To, b)
			}
			n++
		}
	}
	if n != len(want) {
		t.Fatalf("MovesByPair has %d buckets, Moves %d", n, len(want))
	}
	if err := pl.CheckDirections(); err != nil {
		t.Fatal(err)
	}
	oldIDs, newIDs := map[string]control.TaskRef{}, map[string]control.TaskRef{}
	for _, t := range old.Tasks {
		oldIDs[t.ID] = t
	}
	for _, t := range pl.New.Tasks {
		newIDs[t.ID] = t
	}
	for _, a := range pl.AddedTasks {
		if _, ok := oldIDs[a.ID]; ok {
			t.Errorf("added task %s already exists", a.ID)
		}
		if newIDs[a.ID] != a {
			t.Errorf("added task %s not in the new deployment", a.ID)
		}
	}
	for _, r := range pl.RemovedTasks {
		if _, ok := newIDs[r.ID]; ok {
			t.Errorf("removed task %s still in the new deployment", r.ID)
		}
	}
	for id, nt := range newIDs {
		if ot, ok := oldIDs[id]; ok && ot != nt {
			t.Errorf("task %s changed placement %v → %v without being replaced", id, ot, nt)
		}
	}
	if _, err := Subscales(pl, 0); err != nil {
		t.Fatalf("subscales: %v", err)
	}
}

// skewedLoad puts weight 1/(b+1) on bucket b: bucket 0 is the hottest.
func skewedLoad(n int) []float64 {
	out := make([]float64, n)
	for b := range out {
		out[b] = 1 / float64(b+1)
	}
	return out
}

func TestRebalanceTable(t *testing.T) {
	ws := workers("w1", "w2", "w3")
	flat := make([]float64, 64)
	for b := range flat {
		flat[b] = 1
	}
	hotLast := make([]float64, 64)
	for b := range hotLast {
		hotLast[b] = 1
	}
	for b := 60; b < 64; b++ {
		hotLast[b] = 30
	}
	tests := []struct {
		name string
		p    int
		load []float64
	}{
		{"zipf-like p2", 2, skewedLoad(64)},
		{"zipf-like p3", 3, skewedLoad(64)},
		{"zipf-like p4", 4, skewedLoad(64)},
		{"hot tail p3", 3, hotLast},
	}
	_ = flat
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := mustInitial(t, helloJob(64, tc.p), ws)
			before := LoadSpread(old, "mapper", tc.load)
			pl, err := Rebalance(old, "mapper", tc.load, ws)
			if err != nil {
				t.Fatal(err)
			}
			checkExecutable(t, old, pl)
			if len(pl.AddedTasks)+len(pl.RemovedTasks) != 0 {
				t.Fatalf("rebalance added %v removed %v", pl.AddedTasks, pl.RemovedTasks)
			}
			if !reflect.DeepEqual(pl.New.Tasks, old.Tasks) {
				t.Fatal("rebalance changed the tasks")
			}
			after := LoadSpread(pl.New, "mapper", tc.load)
			if !(after < before) {
				t.Fatalf("spread %.3f → %.3f, want lower", before, after)
			}
			// Rebalancing the result again improves it further or says it cannot.
			if again, err := Rebalance(pl.New, "mapper", tc.load, ws); err == nil {
				if s := LoadSpread(again.New, "mapper", tc.load); s > after {
					t.Fatalf("second rebalance raised the spread %.3f → %.3f", after, s)
				}
			} else if !strings.Contains(err.Error(), "no bucket move lowers the spread") {
				t.Fatalf("second rebalance: %v", err)
			}
			t.Logf("spread %.3f → %.3f with %d moves", before, after, len(pl.Moves))
		})
	}
}

func TestRebalanceErrors(t *testing.T) {
	ws := workers("w1", "w2")
	old := mustInitial(t, helloJob(64, 2), ws)
	one := mustInitial(t, helloJob(64, 1), ws)
	flat := make([]float64, 64)
	for b := range flat {
		flat[b] = 1
	}
	neg := slices.Clone(flat)
	neg[3] = -1
	nan := slices.Clone(flat)
	nan[4] = math.NaN()
	tests := []struct {
		name string
		d    control.Deployment
		op   string
		load []float64
		want string
	}{
		{"unknown operator", old, "nope", flat, `operator "nope" not found (operators: source, mapper, sink)`},
		{"source", old, "source", flat, `operator "source" is a source`},
		{"short load", old, "mapper", flat[:10], `bucket load has 10 entries, job has NumBuckets 64`},
		{"negative", old, "mapper", neg, `load -1 of bucket 3 must be a finite number ≥ 0`},
		{"nan", old, "mapper", nan, `load NaN of bucket 4`},
		{"single task", one, "mapper", flat, `it has a single task`},
		{"balanced", old, "mapper", flat, `no bucket move lowers the spread (task loads max 32, min 32)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Rebalance(tc.d, tc.op, tc.load, ws)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestMigrateTaskSteps(t *testing.T) {
	ws := workers("w1", "w2", "w3")
	for _, tc := range []struct {
		p    int
		task int
		to   string
	}{{2, 0, "w3"}, {2, 1, "w1"}, {3, 1, "w1"}, {3, 2, "w1"}, {4, 0, "w2"}} {
		old := mustInitial(t, helloJob(64, tc.p), ws)
		id := control.TaskID("mapper", tc.task)
		var from control.TaskRef
		for _, x := range old.Tasks {
			if x.ID == id {
				from = x
			}
		}
		if from.WorkerID == tc.to { // pick another worker
			tc.to = map[string]string{"w1": "w2", "w2": "w3", "w3": "w1"}[tc.to]
		}
		steps, err := MigrateTaskSteps(old, id, tc.to, ws)
		if err != nil {
			t.Fatal(err)
		}
		checkExecutable(t, old, steps[0])
		checkExecutable(t, steps[0].New, steps[1])
		final := steps[1].New
		if _, pending, _ := Pending(final, "mapper"); pending {
			t.Fatal("migration still pending after step 2")
		}
		if !reflect.DeepEqual(final.Job.Params, old.Job.Params) {
			t.Fatalf("params %v, want %v", final.Job.Params, old.Job.Params)
		}
		spec, _ := final.Job.Operator("mapper")
		if spec.Parallelism != tc.p {
			t.Fatalf("parallelism %d, want %d", spec.Parallelism, tc.p)
		}
		// The migrated buckets are owned by one task on the target worker.
		ot, _ := old.Table("mapper")
		nt, _ := final.Table("mapper")
		moved := final.TasksOf("mapper")[tc.p-1]
		if moved.WorkerID != tc.to {
			t.Fatalf("task %s on %s, want %s", moved.ID, moved.WorkerID, tc.to)
		}
		for b := range ot.Buckets {
			switch ot.Buckets[b] {
			case tc.task:
				if nt.Buckets[b] != tc.p-1 {
					t.Fatalf("bucket %d of the migrated task → %d", b, nt.Buckets[b])
				}
			case tc.p - 1: // the former last task's buckets now belong to tc.task
				if nt.Buckets[b] != tc.task {
					t.Fatalf("bucket %d of the last task → %d, want %d", b, nt.Buckets[b], tc.task)
				}
			default:
				if nt.Buckets[b] != ot.Buckets[b] {
					t.Fatalf("untouched bucket %d moved", b)
				}
			}
		}
		for _, x := range final.TasksOf("mapper")[:tc.p-1] {
			if o := old.TasksOf("mapper")[x.Index]; o != x {
				t.Fatalf("task %s changed: %v → %v", x.ID, o, x)
			}
		}
	}
}

func TestMigrateTaskErrors(t *testing.T) {
	ws := workers("w1", "w2")
	old := mustInitial(t, helloJob(64, 2), ws) // mapper-0 on w2, mapper-1 on w1
	one := mustInitial(t, helloJob(64, 1), ws)
	first, err := MigrateTask(old, "mapper-0", "w1", ws)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		d      control.Deployment
		task   string
		worker string
		want   string
	}{
		{"unknown task", old, "mapper-7", "w1", `task "mapper-7" not found (tasks: source-0, mapper-0, mapper-1, sink-0)`},
		{"unknown worker", old, "mapper-0", "w9", `target worker "w9" is unknown (workers: w1, w2)`},
		{"same worker", old, "mapper-0", "w2", `task "mapper-0" is already on worker "w2"`},
		{"source", old, "source-0", "w2", `operator "source" is a source`},
		{"only task", one, "mapper-0", "w1", `task "mapper-0" is the only task of operator "mapper"`},
		{"other pending", first.New, "mapper-0", "w2", `half-way through a migration to worker "w1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := MigrateTask(tc.d, tc.task, tc.worker, ws)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
