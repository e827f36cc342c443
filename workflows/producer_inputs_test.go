package workflows

import (
	"slices"
	"testing"

	"koala/dataplane/control"
)

// TestProducerInputsFilePath: the "FilePath" knob reaches every producer's
// request as the list of trace files.
func TestProducerInputsFilePath(t *testing.T) {
	job := control.JobSpec{JobID: "j", Topic: "koala-j"}
	workers := []control.WorkerInfo{{ID: "w1"}, {ID: "w2"}}
	in := ExperimentInput{Producer: ProducerSpec{Generator: "azure", RatePerSec: 10, Producers: 2}, Params: map[string]string{"FilePath": "a/x.csv,b/y.csv"}}
	for _, p := range producerInputs(in, job, workers) {
		if !slices.Equal(p.Request.FilePath, []string{"a/x.csv", "b/y.csv"}) {
			t.Fatalf("producer on %s reads %q", p.WorkerID, p.Request.FilePath)
		}
	}
	in.Params = map[string]string{}
	if got := producerInputs(in, job, workers)[0].Request.FilePath; got != nil {
		t.Fatalf("without the knob the request reads files %q", got)
	}
}
