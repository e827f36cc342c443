package main

import (
	"reflect"
	"testing"

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
