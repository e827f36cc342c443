package plan

import (
	"strings"
	"testing"

	"koala/dataplane/control"
)

func TestReplace(t *testing.T) {
	dep, err := Initial(helloJob(16, 4), workers("w1", "w2", "w3"))
	if err != nil {
		t.Fatal(err)
	}
	onW2 := map[string]bool{}
	for _, task := range dep.Tasks {
		if task.WorkerID == "w2" {
			onW2[task.ID] = true
		}
	}
	if len(onW2) == 0 {
		t.Fatal("fixture: no task on w2")
	}
	cases := []struct {
		name    string
		lost    []string
		workers []control.WorkerInfo
		wantErr string
	}{
		{name: "one lost", lost: []string{"w2"}, workers: workers("w1", "w2", "w3")},
		{name: "two lost", lost: []string{"w2", "w3"}, workers: workers("w1", "w2", "w3")},
		{name: "all lost", lost: []string{"w1", "w2", "w3"}, workers: workers("w1", "w2", "w3"), wantErr: "no surviving worker"},
		{name: "task on an unknown worker", lost: []string{"w9"}, workers: workers("w1", "w3"), wantErr: "neither surviving nor lost"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Replace(dep, tc.lost, tc.workers)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			perWorker := map[string]int{}
			for i, task := range got.Tasks {
				old := dep.Tasks[i]
				if task.ID != old.ID || task.Index != old.Index || task.Operator != old.Operator {
					t.Fatalf("task %d changed identity: %+v → %+v", i, old, task)
				}
				for _, l := range tc.lost {
					if task.WorkerID == l {
						t.Fatalf("task %s still on lost worker %s", task.ID, l)
					}
				}
				lostHere := false
				for _, l := range tc.lost {
					lostHere = lostHere || old.WorkerID == l
				}
				if !lostHere && task.WorkerID != old.WorkerID {
					t.Fatalf("task %s on a surviving worker moved %s → %s", task.ID, old.WorkerID, task.WorkerID)
				}
				if task.DataAddr != task.WorkerID+":7000" {
					t.Fatalf("task %s: address %q does not match worker %s", task.ID, task.DataAddr, task.WorkerID)
				}
				perWorker[task.WorkerID]++
			}
			if !equalRouting(got.Routing, dep.Routing) {
				t.Fatalf("routing changed")
			}
			if len(tc.lost) == 1 {
				// The moved tasks go to the least-loaded survivors: loads differ by at most one.
				if d := perWorker["w1"] - perWorker["w3"]; d > 1 || d < -1 {
					t.Fatalf("unbalanced placement %v", perWorker)
				}
			}
		})
	}
}

func equalRouting(a, b []control.RoutingTable) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Operator != b[i].Operator || a[i].Epoch != b[i].Epoch || len(a[i].Buckets) != len(b[i].Buckets) {
			return false
		}
		for j := range a[i].Buckets {
			if a[i].Buckets[j] != b[i].Buckets[j] {
				return false
			}
		}
	}
	return true
}
