package main

import (
	"strings"
	"testing"

	"koala/workflows"
)

func TestReconfigureFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   reconfigureFlags
		want    workflows.ReconfigSpec
		wantErr string
	}{
		{"scale", reconfigureFlags{job: "j", operator: "counter", parallelism: 4, task: -1},
			workflows.ReconfigSpec{TargetOperator: "counter", TargetParallelism: 4}, ""},
		{"task migration", reconfigureFlags{job: "j", operator: "counter", kind: "task-migration", task: 1, worker: "w2"},
			workflows.ReconfigSpec{Type: "task-migration", TargetOperator: "counter", TaskID: "counter-1", TargetWorker: "w2"}, ""},
		{"no job", reconfigureFlags{operator: "counter", parallelism: 2, task: -1}, workflows.ReconfigSpec{}, "--job is required"},
		{"no operator", reconfigureFlags{job: "j", parallelism: 2, task: -1}, workflows.ReconfigSpec{}, "--operator is required"},
		{"parallelism 0", reconfigureFlags{job: "j", operator: "counter", task: -1}, workflows.ReconfigSpec{}, "--parallelism 0: must be ≥ 1"},
		{"unknown type", reconfigureFlags{job: "j", operator: "counter", kind: "shuffle", task: -1}, workflows.ReconfigSpec{}, `--type "shuffle" is unknown`},
		{"migration without worker", reconfigureFlags{job: "j", operator: "counter", kind: "task-migration", task: 1},
			workflows.ReconfigSpec{Type: "task-migration", TargetOperator: "counter", TaskID: "counter-1"}, ""},
		{"migration choosing both", reconfigureFlags{job: "j", operator: "counter", kind: "task-migration", task: -1},
			workflows.ReconfigSpec{Type: "task-migration", TargetOperator: "counter"}, ""},
		{"migration with a negative task", reconfigureFlags{job: "j", operator: "counter", kind: "task-migration", task: -3}, workflows.ReconfigSpec{}, "--task -3: must be a task index ≥ 0"},
		{"bad bucket load", reconfigureFlags{job: "j", operator: "counter", kind: "rebalance", bucketLoad: "1,x", task: -1}, workflows.ReconfigSpec{}, `--bucket-load value 1 "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.flags.spec()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.TargetOperator != tc.want.TargetOperator || got.TargetParallelism != tc.want.TargetParallelism ||
				got.Type != tc.want.Type || got.TaskID != tc.want.TaskID || got.TargetWorker != tc.want.TargetWorker {
				t.Fatalf("spec %+v, want %+v", got, tc.want)
			}
		})
	}
}
