package plan

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"koala/dataplane/control"
)

// placed is d with its tasks moved as placement says ("task:worker ...").
func placed(t *testing.T, d control.Deployment, ws []control.WorkerInfo, placement string) control.Deployment {
	t.Helper()
	d = deepCopy(t, d)
	for _, f := range strings.Fields(placement) {
		id, w, _ := strings.Cut(f, ":")
		i := slices.IndexFunc(d.Tasks, func(x control.TaskRef) bool { return x.ID == id })
		j := slices.IndexFunc(ws, func(x control.WorkerInfo) bool { return x.ID == w })
		if i < 0 || j < 0 {
			t.Fatalf("placement %q: no task %q or worker %q", placement, id, w)
		}
		d.Tasks[i].WorkerID, d.Tasks[i].DataAddr = w, ws[j].DataAddr
	}
	if err := Validate(d); err != nil {
		t.Fatalf("placement %q: %v", placement, err)
	}
	return d
}

func TestChooseMigration(t *testing.T) {
	ws := workers("w1", "w2", "w3", "w4", "w5")
	job := helloJob(64, 4)
	base := mustInitial(t, job, ws)
	// The artifact's layout: the source, the sink and the first mapper task
	// share w1; the other mapper tasks have a worker each; w5 is idle.
	artifact := placed(t, base, ws, "source-0:w1 sink-0:w1 mapper-0:w1 mapper-1:w2 mapper-2:w3 mapper-3:w4")
	evacuated, err := MigrateTask(artifact, "mapper-3", "w5", ws)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		d         control.Deployment
		ws        []control.WorkerInfo
		op, task  string
		to        string
		want      MigrationChoice
		wantError string
	}{
		{name: "artifact: busiest worker's task to the idle worker", d: artifact, op: "mapper",
			want: MigrationChoice{Operator: "mapper", TaskID: "mapper-0", From: "w1", To: "w5", Step: 1}},
		{name: "highest index on the busiest worker", op: "mapper",
			d:    placed(t, base, ws, "source-0:w1 sink-0:w2 mapper-0:w3 mapper-1:w4 mapper-2:w3 mapper-3:w5"),
			want: MigrationChoice{Operator: "mapper", TaskID: "mapper-2", From: "w3", To: "w1", Step: 1}},
		{name: "ties: the worker id that sorts first, both ways", op: "mapper",
			d:    placed(t, base, ws, "source-0:w4 sink-0:w2 mapper-0:w2 mapper-1:w4 mapper-2:w1 mapper-3:w5"),
			want: MigrationChoice{Operator: "mapper", TaskID: "mapper-0", From: "w2", To: "w3", Step: 1}},
		{name: "other operators' tasks count", op: "mapper",
			d:    placed(t, base, ws, "source-0:w5 sink-0:w5 mapper-0:w1 mapper-1:w2 mapper-2:w3 mapper-3:w5"),
			want: MigrationChoice{Operator: "mapper", TaskID: "mapper-3", From: "w5", To: "w4", Step: 1}},
		{name: "task given: the idlest other worker", d: artifact, op: "mapper", task: "mapper-2",
			want: MigrationChoice{Operator: "mapper", TaskID: "mapper-2", From: "w3", To: "w5", Step: 1}},
		{name: "task given without operator", d: artifact, task: "mapper-1",
			want: MigrationChoice{Operator: "mapper", TaskID: "mapper-1", From: "w2", To: "w5", Step: 1}},
		{name: "worker given: busiest task not on it", d: artifact, op: "mapper", to: "w1",
			want: MigrationChoice{Operator: "mapper", TaskID: "mapper-1", From: "w2", To: "w1", Step: 1}},
		{name: "both given: kept", d: artifact, op: "mapper", task: "mapper-1", to: "w4",
			want: MigrationChoice{Operator: "mapper", TaskID: "mapper-1", From: "w2", To: "w4", Step: 1}},
		{name: "second step takes the pending migration", d: evacuated.New, op: "mapper",
			want: MigrationChoice{Operator: "mapper", TaskID: "mapper-3", To: "w5", Step: 2}},
		{name: "second step by task id", d: evacuated.New, task: "mapper-3",
			want: MigrationChoice{Operator: "mapper", TaskID: "mapper-3", To: "w5", Step: 2}},
		{name: "no operator and no task", d: artifact, wantError: "needs TargetOperator (the task is then chosen) or TaskID"},
		{name: "unknown operator", d: artifact, op: "mapperz", wantError: `operator "mapperz" not found (operators: source, mapper, sink)`},
		{name: "unknown task", d: artifact, task: "mapper-9", wantError: `task "mapper-9" not found`},
		{name: "task of another operator", d: artifact, op: "mapper", task: "sink-0", wantError: `task "sink-0" belongs to operator "sink", not TargetOperator "mapper"`},
		{name: "unknown worker", d: artifact, op: "mapper", to: "w9", wantError: `target worker "w9" is unknown (workers: w1, w2, w3, w4, w5)`},
		{name: "only worker", d: mustInitial(t, helloJob(64, 2), workers("w1")), ws: workers("w1"), op: "mapper",
			wantError: `task "mapper-1" cannot move: worker "w1" is the job's only worker`},
		{name: "every task on the target already", d: mustInitial(t, helloJob(64, 2), workers("w1")), ws: workers("w1", "w2"), op: "mapper", to: "w1",
			wantError: `operator "mapper" has no task that is not on worker "w1" already`},
		{name: "pending: another task", d: evacuated.New, op: "mapper", task: "mapper-1", wantError: `pending migration of task "mapper-3" to worker "w5"`},
		{name: "pending: another worker", d: evacuated.New, op: "mapper", to: "w2", wantError: `half-way through a migration to worker "w5"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tws := ws
			if tc.ws != nil {
				tws = tc.ws
			}
			got, err := ChooseMigration(tc.d, tc.op, tc.task, tc.to, tws)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			// The order workers are listed in does not change the choice.
			shuffled := slices.Clone(tws)
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if again, _ := ChooseMigration(tc.d, tc.op, tc.task, tc.to, shuffled); again != got {
				t.Fatalf("with workers %v: %+v, want %+v", workerIDs(shuffled), again, got)
			}
			// The choice is one MigrateTask carries out: the chosen task's
			// buckets end up on the chosen worker.
			steps := []Plan{}
			if got.Step == 1 {
				steps, err = MigrateTaskSteps(tc.d, got.TaskID, got.To, tws)
			} else {
				var pl Plan
				pl, err = MigrateTask(tc.d, got.TaskID, got.To, tws)
				steps = append(steps, pl)
			}
			if err != nil {
				t.Fatalf("MigrateTask of the choice: %v", err)
			}
			final := steps[len(steps)-1].New
			last := final.TasksOf(got.Operator)[len(final.TasksOf(got.Operator))-1]
			if last.WorkerID != got.To {
				t.Fatalf("moved buckets run on %s (task %s), want %s", last.WorkerID, last.ID, got.To)
			}
		})
	}
}

func TestMigrationChoiceString(t *testing.T) {
	for _, tc := range []struct {
		c    MigrationChoice
		want string
	}{
		{MigrationChoice{Operator: "m", TaskID: "m-0", From: "w1", To: "w5", Step: 1}, "task m-0: worker w1 → worker w5 (step 1/2: evacuate)"},
		{MigrationChoice{Operator: "m", TaskID: "m-0", To: "w5", Step: 2}, "task m-0 → worker w5 (step 2/2: place)"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}
