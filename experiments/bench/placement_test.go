package bench

import (
	"reflect"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/workflows"
)

func TestPlaceProducers(t *testing.T) {
	ws := []workerFile{{"w1", 11}, {"w2", 12}, {"w3", 13}}
	for _, tc := range []struct {
		name                 string
		in                   workflows.ExperimentInput
		wantProducerWorkers  []string
		wantTasks, wantProds []int
	}{
		{"last worker produces", workflows.ExperimentInput{MinWorkers: 1}, []string{"w3"}, []int{11, 12}, []int{13}},
		{"named producer worker kept", workflows.ExperimentInput{MinWorkers: 1, ProducerWorkers: []string{"w1"}}, []string{"w1"}, []int{12, 13}, []int{11}},
		{"config's task workers kept", workflows.ExperimentInput{MinWorkers: 1, Workers: []string{"w1", "w2", "w3"}}, nil, []int{11, 12, 13}, []int{}},
		{"too few workers to spare one", workflows.ExperimentInput{MinWorkers: 3}, nil, []int{11, 12, 13}, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			tasks, prods := placeProducers(&in, ws)
			if !reflect.DeepEqual(in.ProducerWorkers, tc.wantProducerWorkers) {
				t.Errorf("ProducerWorkers %v, want %v", in.ProducerWorkers, tc.wantProducerWorkers)
			}
			if got := pidsOf(tasks); !reflect.DeepEqual(got, tc.wantTasks) {
				t.Errorf("task PIDs %v, want %v", got, tc.wantTasks)
			}
			if got := pidsOf(prods); !reflect.DeepEqual(got, tc.wantProds) {
				t.Errorf("producer PIDs %v, want %v", got, tc.wantProds)
			}
		})
	}
}

// Only the workers a run placed tasks on count as pipeline CPU.
func TestPipelineCPUFromHostingWorkers(t *testing.T) {
	ws := []workerFile{{"w1", 11}, {"w2", 12}}
	dep := control.Deployment{Tasks: []control.TaskRef{{ID: "source-0", WorkerID: "w1"}, {ID: "sink-0", WorkerID: "w1"}}}
	keep, hosting := hostingWorkers(ws, dep)
	if !reflect.DeepEqual(keep, []bool{true, false}) || !reflect.DeepEqual(pidsOf(hosting), []int{11}) {
		t.Fatalf("keep %v, hosting %v; want w1 only", keep, hosting)
	}
	t0 := time.Unix(100, 0)
	s := &cpuSampler{
		samples: []CPUSample{{At: t0, Seconds: 3, Producer: 1}, {At: t0.Add(time.Second), Seconds: 5, Producer: 2}},
		perPID:  [][]float64{{2, 1}, {3.5, 1.5}},
	}
	got := s.only(keep)
	if got[0].Seconds != 2 || got[1].Seconds != 3.5 || got[1].Producer != 2 || !got[1].At.Equal(t0.Add(time.Second)) {
		t.Fatalf("samples of w1: %+v", got)
	}
	if s.samples[1].Seconds != 5 {
		t.Errorf("the sampler's own samples changed: %+v", s.samples)
	}
}
