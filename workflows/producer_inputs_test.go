package workflows

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"koala/dataplane/control"
)

// TestProducerInputsRateSchedule: a RateLimiterConfig limits every
// producer to the full schedule (per-producer semantics), while
// RatePerSec is split among the producers.
func TestProducerInputsRateSchedule(t *testing.T) {
	job := control.JobSpec{JobID: "j", Topic: "t", KafkaBrokers: []string{"k:9092"}}
	workers := []control.WorkerInfo{{ID: "w1"}, {ID: "w2"}}
	in := ExperimentInput{Producer: ProducerSpec{RatePerSec: 10, Producers: 3, NumKeys: 5},
		Params: map[string]string{"RateLimiterConfig": `{"RateLimit":[100,400],"RateChangeInterval":[50]}`}}
	got := producerInputs(in, job, workers)
	if len(got) != 3 {
		t.Fatalf("%d producers, want 3", len(got))
	}
	for i, p := range got {
		if !reflect.DeepEqual(p.Request.RateLimit, []int64{100, 400}) || !reflect.DeepEqual(p.Request.RateChangeInterval, []int64{50}) {
			t.Errorf("producer %d: schedule %v / %v", i, p.Request.RateLimit, p.Request.RateChangeInterval)
		}
	}
	in.Params = nil
	for i, p := range producerInputs(in, job, workers) {
		if p.Request.RateLimit != nil || p.Request.RatePerSec != []int{4, 3, 3}[i] {
			t.Errorf("without a schedule, producer %d: rate %d, schedule %v", i, p.Request.RatePerSec, p.Request.RateLimit)
		}
	}
	in.Params = map[string]string{"RateLimiterConfig": `{"RateLimit":[-1]}`}
	in.QueryName, in.TotalRuntimeSeconds, in.KafkaBrokers = "q", 10, []string{"k:9092"}
	if err := validateInput(in); err == nil || !strings.Contains(err.Error(), "RateLimiterConfig.RateLimit[0]") {
		t.Fatalf("validateInput: %v, want an error naming RateLimiterConfig.RateLimit[0]", err)
	}
}

// TestProducerInputsFilePath: the "FilePath" knob's files are dealt out
// among the producers, so that no file is replayed twice.
func TestProducerInputsFilePath(t *testing.T) {
	job := control.JobSpec{JobID: "j", Topic: "koala-j"}
	workers := []control.WorkerInfo{{ID: "w1"}, {ID: "w2"}}
	in := ExperimentInput{Producer: ProducerSpec{Generator: "azure", RatePerSec: 10, Producers: 2}, Params: map[string]string{"FilePath": "a/x.csv,b/y.csv"}}
	got := producerInputs(in, job, workers)
	if len(got) != 2 || !slices.Equal(got[0].Request.FilePath, []string{"a/x.csv"}) || !slices.Equal(got[1].Request.FilePath, []string{"b/y.csv"}) {
		t.Fatalf("producers read %+v, want one file each", got)
	}
	in.Params = map[string]string{}
	if got := producerInputs(in, job, workers)[0].Request.FilePath; got != nil {
		t.Fatalf("without the knob the request reads files %q", got)
	}
}
